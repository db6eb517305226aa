//! The conformance kit against a file image with the ZNS+ commands on: every ZNS item still
//! holds, and the ZNS+ items 45-53 (docs/ZNSPLUS.md) run and pass through real clean
//! shutdowns, process kills and reopens of the image, so items 52 and 53 prove the image's
//! valid-bitmap region and TL-opened entries (docs/FORMAT.md).

mod file_factory;

use file_factory::FileFactory;
use zns::conformance::{check_item, Outcome};

zns::conformance_tests!(FileFactory::new(true));

#[test]
fn zns_plus_items_apply_and_pass_on_an_image() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let factory = FileFactory::new(true);
    for item in 45..=53 {
        assert_eq!(
            rt.block_on(check_item(&factory, item)),
            Outcome::Pass,
            "item {item}"
        );
    }
}
