//! Many commands in flight: writes queued in write-pointer order all succeed, one out of
//! order fails; appends in flight together land in an order the device draws from its seed,
//! repeatably, and their LBAs tile the zone.

mod common;

use common::block_on;
use futures::future::join_all;
use zns::{NvmeStatus, ReportFilter, ZonedDevice};

#[test]
fn queued_writes_in_wp_order_succeed_and_one_out_of_order_fails() {
    block_on(async {
        let dev = common::memory(0);
        let bufs: Vec<Vec<u8>> = (0..16u8).map(|i| vec![i; 512]).collect();
        let results =
            join_all((0..16u64).map(|i| dev.write(i, &bufs[i as usize], None, false))).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let bad = join_all([
            dev.write(16, &bufs[0], None, false),
            dev.write(18, &bufs[1], None, false),
            dev.write(17, &bufs[2], None, false),
        ])
        .await;
        assert_eq!(bad, vec![Ok(()), Err(NvmeStatus::ZoneInvalidWrite), Ok(())]);
    });
}

fn append_lbas(seed: u64) -> Vec<u64> {
    block_on(async {
        let dev = common::memory(seed);
        let bufs: Vec<Vec<u8>> = (0..12u8).map(|i| vec![i + 1; 1024]).collect();
        let lbas: Vec<u64> = join_all(bufs.iter().map(|b| dev.append(32, b, None, false)))
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .expect("appends");
        // Every append's data is where its LBA says.
        for (i, lba) in lbas.iter().enumerate() {
            let mut got = vec![0u8; 1024];
            dev.read(*lba, &mut got, None).await.expect("read");
            assert_eq!(got, bufs[i]);
        }
        let wp = dev
            .report_zones(32, ReportFilter::All, true, 1)
            .await
            .expect("report")
            .zones[0]
            .wp;
        let mut sorted = lbas.clone();
        sorted.sort();
        assert_eq!(sorted, (0..12).map(|i| 32 + 2 * i).collect::<Vec<_>>());
        assert_eq!(wp, 32 + 24);
        lbas
    })
}

#[test]
fn concurrent_appends_land_in_a_seeded_device_chosen_order() {
    assert_eq!(append_lbas(11), append_lbas(11));
    let orders: std::collections::HashSet<_> = (0..8).map(append_lbas).collect();
    assert!(orders.len() > 1, "the device never reordered appends");
    assert!(
        orders.iter().any(|o| o.windows(2).any(|w| w[0] > w[1])),
        "appends always landed in submission order"
    );
}

#[test]
fn an_append_that_does_not_fit_is_not_split() {
    block_on(async {
        let dev = common::memory(0);
        dev.write(0, &vec![1u8; 20 * 512], None, false)
            .await
            .expect("write");
        let r = dev.append(0, &vec![2u8; 8 * 512], None, false).await;
        assert_eq!(r, Err(NvmeStatus::ZoneBoundaryError));
        let d = dev
            .report_zones(0, ReportFilter::All, true, 1)
            .await
            .expect("report")
            .zones[0];
        assert_eq!(d.wp, 20);
    });
}
