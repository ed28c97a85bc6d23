//! A region file cut short under its mappings (another process truncated
//! it) is survived: each side's next access reads zeros and the region says
//! it was cut. A SIGBUS that is not a guarded region's still ends the
//! process as it would have.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use oae_swapring::layout::MAGIC;
use oae_swapring::region::{Region, RegionConfig, unique_shm_path};

#[test]
fn a_region_cut_short_reads_zeros_and_says_so_at_both_sides() {
    let path = unique_shm_path("oae-swapring-cut");
    let creator = Region::create(&path, &RegionConfig::default()).unwrap();
    let attached = Region::open(&path).unwrap();
    let last = creator.words().len() - 1;
    creator.words()[last].store(7, Ordering::Relaxed);
    assert_eq!(attached.words()[last].load(Ordering::Relaxed), 7);
    assert!(!creator.cut() && !attached.cut());

    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();

    // Each mapping faults on its own first access past the new end; before
    // the guard, this killed the process with SIGBUS.
    for side in [&creator, &attached] {
        assert_eq!(side.words()[0].load(Ordering::Acquire), 0, "magic gone");
        assert_eq!(side.words()[last].load(Ordering::Relaxed), 0);
        assert!(side.cut());
        // What a side writes now stays in its own private memory.
        side.words()[last].store(9, Ordering::Relaxed);
    }
    assert_eq!(attached.words()[last].load(Ordering::Relaxed), 9);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);

    // A new region at another path is served as usual meanwhile.
    let other = Region::create(
        unique_shm_path("oae-swapring-cut"),
        &RegionConfig::default(),
    )
    .unwrap();
    assert_eq!(other.words()[0].load(Ordering::Acquire), MAGIC);
    assert!(!other.cut());
}

const OUTSIDE_CHILD: &str = "OAE_SWAPRING_CUT_OUTSIDE_CHILD";

/// In a process of its own: a guarded region exists (so the handler is
/// installed), and a file mapped without a guard is cut and touched.
#[test]
fn a_sigbus_outside_every_region_still_ends_the_process() {
    if let Some(guarded) = std::env::var_os(OUTSIDE_CHILD) {
        touch_an_unguarded_mapping_of_a_cut_file(guarded.as_ref());
        return;
    }
    // The child dies by the signal: its region's file is removed here.
    let guarded = unique_shm_path("oae-swapring-cut");
    let me = std::env::current_exe().unwrap();
    // No core file for the death this child is for; bounded, in case the
    // fault were swallowed and recurred without end.
    let child = Command::new("sh")
        .args(["-c", r#"ulimit -c 0 && exec "$0" "$@""#])
        .arg(&me)
        .args([
            "--exact",
            "a_sigbus_outside_every_region_still_ends_the_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(OUTSIDE_CHILD, &guarded)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_at_most(child, Duration::from_secs(120));
    let _ = std::fs::remove_file(&guarded);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGBUS),
        "{me:?}: {}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("touching"), "{stdout}");
}

fn touch_an_unguarded_mapping_of_a_cut_file(guarded: &std::path::Path) {
    let _guarded = Region::create(guarded, &RegionConfig::default()).unwrap();
    let path = unique_shm_path("oae-swapring-unguarded");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    file.set_len(4096).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: a fresh shared mapping of one page of a file this test made;
    // nothing else refers to it.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED);
    file.set_len(0).unwrap();
    std::fs::remove_file(&path).unwrap();
    println!("touching");
    #[allow(unsafe_code)]
    // SAFETY: the page is mapped; reading it past the file's end raises
    // SIGBUS, which is what this child is for.
    let byte = unsafe { std::ptr::read_volatile(page.cast::<u8>()) };
    println!("survived, read {byte}");
}

/// The child's output once it ends; killed (by its pid) if it overstays.
fn wait_at_most(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the child overstayed {limit:?}: {out:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}
