//! The performance model of the emulated SSD: when each command completes.
//!
//! Off by default. A device with timing keeps its zone state machine and data path exactly as
//! without; the model only decides the instant each command completes, from the resources it
//! needs (controller, host link, write buffer, channels, dies), and the device's async shell
//! waits until then on the chosen clock. The model is plain synchronous code (`zoned`), tested
//! directly; `clock` holds the virtual and real-time clocks. docs/DESIGN.md describes the
//! model and docs/BENCHMARKS.md the profiles and their sources.

pub mod buffer;
pub mod clock;
pub mod flash;
pub mod pagemap;
pub mod plugging;
pub mod profile;
pub mod resource;
pub mod zoned;

pub use clock::{sim_steps, wait_until, ClockMode, SimRuntime};
pub use flash::FlashCounters;
pub use pagemap::{ConvCmd, GcCounters, PageMapped};
pub use plugging::PlugOrder;
pub use profile::{timing_profile, timing_profiles, TimingProfile};
pub use zoned::{MovePaths, PathCost, TimedCmd, TimingCounters, ZonedTiming};
