//! Benchmarks for zonestack devices: a workload driver that runs concurrent jobs against any
//! `ZonedDevice` and measures them on tokio's clock (virtual time under `emu::SimRuntime`),
//! and the reproductions of the papers' device figures on the emulator's timing model.

pub mod blockload;
pub mod fio;
pub mod jobfile;
pub mod mdraid;
pub mod paper;
pub mod raizn_append;
pub mod raizn_fig10;
pub mod raizn_fig12;
pub mod raizn_fig9;
pub mod raizn_fua;
pub mod raizn_seq;
pub mod raizn_xor;
pub mod series;
pub mod workload;
pub mod zapraid_array;
pub mod zapraid_compare;
pub mod zapraid_exp1;
pub mod zapraid_exp2;
pub mod zapraid_exp3;
pub mod zns_fig1;
pub mod znsplus_fig6;
pub mod znsplus_fig7;
pub mod znsplus_fig8;
pub mod znsplus_varmail;

pub use paper::{Options, Row, PAPERS};
pub use workload::{Job, Pattern, Report};
