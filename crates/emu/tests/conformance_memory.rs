//! The ZNS conformance kit, every checklist item and the property tests, against the
//! emulator's memory backend.

mod memory_factory;

use memory_factory::MemoryFactory;

zns::conformance_tests!(MemoryFactory {
    timing: None,
    zns_plus: false,
});
