//! A region whose header is wrong in any way is refused with an error that
//! says what was found and what was expected.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use oae_swapring::bilateral::MAX_SLOT_BATCH;
use oae_swapring::cost::{CostModel, CostParseError, MAX_COST_NS};
use oae_swapring::layout::{Geometry, HEADER_BYTES, MAGIC, VERSION};
use oae_swapring::region::{Region, RegionConfig, RegionError, unique_shm_path};

const W_MAGIC: u64 = 0;
const W_VERSION: u64 = 1;
const W_TOTAL_BYTES: u64 = 2;
const W_MODE: u64 = 3;
const W_RING_CAPACITY: u64 = 4;
const W_RECORD_BYTES: u64 = 5;
const W_COST: u64 = 8;
const W_SLOT_BATCH: u64 = 12;

/// Creates a good region, lets `spoil` damage the file, and returns what
/// `open` says about it.
fn open_after(spoil: impl FnOnce(&std::fs::File)) -> Result<Region, RegionError> {
    let path = unique_shm_path("oae-swapring-header");
    let creator = Region::create(&path, &RegionConfig::default()).unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    spoil(&file);
    let result = Region::open(&path);
    drop(creator);
    assert!(!path.exists(), "creator removes its file");
    result
}

fn put(file: &std::fs::File, word: u64, value: u64) {
    file.write_all_at(&value.to_le_bytes(), word * 8).unwrap();
}

#[test]
fn good_region_attaches_and_reads_back_its_config() {
    let path = unique_shm_path("oae-swapring-header");
    let config = RegionConfig {
        geometry: Geometry {
            ring_capacity: 8,
            slots: 3,
            slot_batch: 5,
        },
        ..RegionConfig::default()
    };
    let creator = Region::create(&path, &config).unwrap();
    let attached = Region::open(&path).unwrap();
    assert_eq!(attached.config(), config);
    assert!(matches!(
        Region::create(&path, &config),
        Err(RegionError::Io { op: "create", .. })
    ));
    drop(attached);
    drop(creator);
    assert!(!path.exists());
}

#[test]
fn wrong_magic_is_refused() {
    let err = open_after(|f| put(f, W_MAGIC, 0x1234)).err().unwrap();
    assert!(
        matches!(err, RegionError::BadMagic { found: 0x1234, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("0x0000000000001234") && text.contains(&format!("{MAGIC:#018x}")),
        "{text}"
    );
}

#[test]
fn unpublished_magic_is_not_ready() {
    let err = open_after(|f| put(f, W_MAGIC, 0)).err().unwrap();
    assert!(matches!(err, RegionError::NotReady { .. }), "{err}");
}

#[test]
fn wrong_version_is_refused() {
    let err = open_after(|f| put(f, W_VERSION, VERSION + 1))
        .err()
        .unwrap();
    assert!(
        matches!(err, RegionError::BadVersion { found, .. } if found == VERSION + 1),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(&format!("speaks version {VERSION}")),
        "{err}"
    );
}

#[test]
fn file_shorter_than_the_header_says_is_refused() {
    let err = open_after(|f| {
        let len = f.metadata().unwrap().len();
        f.set_len(len - 4096).unwrap();
    })
    .err()
    .unwrap();
    match &err {
        RegionError::SizeMismatch { header, file, .. } => assert_eq!(header - file, 4096),
        other => panic!("expected a size mismatch, got {other}"),
    }
    assert!(err.to_string().contains("header says"), "{err}");
}

#[test]
fn file_longer_than_the_header_says_is_refused() {
    let err = open_after(|f| {
        let len = f.metadata().unwrap().len();
        f.set_len(len + 8).unwrap();
    })
    .err()
    .unwrap();
    assert!(matches!(err, RegionError::SizeMismatch { .. }), "{err}");
}

#[test]
fn file_shorter_than_a_header_is_refused() {
    let err = open_after(|f| f.set_len(HEADER_BYTES as u64 - 1).unwrap())
        .err()
        .unwrap();
    assert!(
        matches!(err, RegionError::TooShortForHeader { .. }),
        "{err}"
    );
}

#[test]
fn geometry_that_does_not_fit_is_refused() {
    let err = open_after(|f| put(f, W_RING_CAPACITY, 1 << 19))
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            RegionError::GeometryDoesNotFit {
                ring_capacity: 524_288,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("needs"), "{err}");
    let err = open_after(|f| put(f, W_RING_CAPACITY, 0)).err().unwrap();
    assert!(
        matches!(err, RegionError::GeometryOutOfBounds { .. }),
        "{err}"
    );
    for batch in [0, MAX_SLOT_BATCH + 1] {
        let err = open_after(|f| put(f, W_SLOT_BATCH, batch)).err().unwrap();
        assert!(
            matches!(err, RegionError::GeometryOutOfBounds { slot_batch, .. } if slot_batch == batch),
            "{err}"
        );
        assert!(err.to_string().contains("records per slot"), "{err}");
    }
}

#[test]
fn wrong_record_size_or_mode_or_total_is_refused() {
    let err = open_after(|f| put(f, W_RECORD_BYTES, 128)).err().unwrap();
    assert!(
        matches!(err, RegionError::BadRecordSize { found: 128, .. }),
        "{err}"
    );
    let err = open_after(|f| put(f, W_MODE, 9)).err().unwrap();
    assert!(
        matches!(err, RegionError::BadMode { found: 9, .. }),
        "{err}"
    );
    let err = open_after(|f| put(f, W_TOTAL_BYTES, 1 << 40))
        .err()
        .unwrap();
    assert!(matches!(err, RegionError::SizeMismatch { .. }), "{err}");
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let path = unique_shm_path("oae-swapring-absent");
    let err = Region::open(&path).err().unwrap();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

/// The peer may scribble on the header after both sides attached: every
/// view stays cut from the geometry each side validated, so nothing indexes
/// outside the mapping and the mode does not change under either side.
#[test]
fn a_header_spoiled_after_attaching_changes_no_view() {
    const W_SLOTS: u64 = 6;
    let path = unique_shm_path("oae-swapring-header");
    let config = RegionConfig {
        mode: oae_swapring::layout::Mode::Bilateral,
        geometry: Geometry {
            ring_capacity: 8,
            slots: 2,
            slot_batch: 4,
        },
        ..RegionConfig::default()
    };
    let creator = Region::create(&path, &config).unwrap();
    let attached = Region::open(&path).unwrap();
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    for (word, value) in [
        (W_SLOTS, 1 << 40),
        (W_SLOT_BATCH, 0),
        (W_RING_CAPACITY, u64::MAX),
        (W_MODE, 77),
        // Every access of a side that read these would spin for hours.
        (W_COST, u64::MAX),
        (W_COST + 1, u64::MAX),
        (W_COST + 2, u64::MAX),
        (W_COST + 3, u64::MAX),
    ] {
        put(&file, word, value);
    }
    for region in [&creator, &attached] {
        assert_eq!(region.config(), config);
        assert_eq!(region.geometry(), config.geometry);
        assert_eq!(region.mode(), config.mode);
        assert_eq!(region.slot_count(), 2);
        assert_eq!(region.slot(1).batch(), 4);
        assert_eq!(region.ring(0).capacity(), 8);
    }
    drop(attached);
    drop(creator);
}

/// A cost model past 1 ms an interaction (each access would busy-wait that
/// long) is refused at creation and when found in a header.
#[test]
fn a_cost_past_the_bound_is_refused() {
    let err = open_after(|f| put(f, W_COST + 2, MAX_COST_NS + 1))
        .err()
        .unwrap();
    assert!(matches!(err, RegionError::CostOutOfBounds { .. }), "{err}");
    assert!(err.to_string().contains("1 ms"), "{err}");
    let path = unique_shm_path("oae-swapring-header");
    let config = RegionConfig {
        cost: CostModel {
            atomic_ns: MAX_COST_NS + 1,
            ..CostModel::default()
        },
        ..RegionConfig::default()
    };
    let err = Region::create(&path, &config).err().unwrap();
    assert!(matches!(err, RegionError::CostOutOfBounds { .. }), "{err}");
    assert!(!path.exists());
    assert!(matches!(
        CostModel::parse("read=1000001"),
        Err(CostParseError::TooLarge { .. })
    ));
    assert_eq!(
        CostModel::parse("zero,read=1000000")
            .unwrap()
            .nonposted_read_ns,
        MAX_COST_NS
    );
}
