//! The conformance kit against the memory backend with the ZNS+ commands on: every ZNS item
//! still holds, and the ZNS+ items 45-53 (docs/ZNSPLUS.md) run and pass rather than being
//! not applicable.

mod memory_factory;

use memory_factory::MemoryFactory;
use zns::conformance::{check_item, Outcome};

const ZNS_PLUS: MemoryFactory = MemoryFactory {
    timing: None,
    zns_plus: true,
};

zns::conformance_tests!(ZNS_PLUS);

#[test]
fn zns_plus_items_apply_and_pass() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for item in 45..=53 {
        assert_eq!(
            rt.block_on(check_item(&ZNS_PLUS, item)),
            Outcome::Pass,
            "item {item}"
        );
    }
}

#[test]
fn zns_plus_items_are_not_applicable_with_the_commands_off() {
    let off = MemoryFactory {
        timing: None,
        zns_plus: false,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    assert_eq!(rt.block_on(check_item(&off, 45)), Outcome::Pass);
    for item in 46..=53 {
        let got = rt.block_on(check_item(&off, item));
        assert!(
            matches!(got, Outcome::NotApplicable(_)),
            "item {item}: {got:?}"
        );
    }
}
