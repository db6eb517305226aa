//! The ZNS conformance kit, every checklist item and the property tests, against a RAIZN
//! volume of three in-memory emulated members (two data units and one parity unit).

mod common;

use std::sync::LazyLock;

use common::RaiznFactory;

static FACTORY: LazyLock<RaiznFactory> = LazyLock::new(|| RaiznFactory::new(3));

zns::conformance_tests!(*FACTORY);
