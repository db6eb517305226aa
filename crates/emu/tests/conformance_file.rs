//! The ZNS conformance kit against the emulator's file backend (see `file_factory` for how
//! restart and power loss reach the image).

mod file_factory;

use file_factory::FileFactory;

zns::conformance_tests!(FileFactory::new(false));
