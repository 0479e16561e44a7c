//! The simulated page cache (`qs_sim::faults::page_cache`): what a power loss leaves of files
//! written through libc's own calls, in this test binary as in `qsim` (the hooks are this
//! executable's `write`, `pwrite`, `fsync`, ...).
#![cfg(madsim)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Mutex;

use qs_sim::faults::page_cache::{self, Lost};
use qs_sim::sync::Locked;

/// The cache is one per process: these tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn write_synced(path: &Path, bytes: &[u8]) {
    let mut file = File::create(path).unwrap();
    file.write_all(bytes).unwrap();
    file.sync_all().unwrap();
}

#[test]
fn unsynced_overwrites_go_back_and_unsynced_appends_are_lost() {
    let _turn = ONE_AT_A_TIME.locked();
    let dir = tempfile::tempdir().unwrap();
    let watch = page_cache::watch(dir.path()).unwrap();
    let path = dir.path().join("data");
    let synced: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    write_synced(&path, &synced);

    let file = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    file.write_all_at(&[0xAA; 100], 5_000).unwrap(); // over synced bytes, in the second page
    file.write_all_at(&[0xBB; 3_000], 10_000).unwrap(); // an append
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 13_000, "the writes reached the file");

    let lost = watch.cut_power(&mut |_| 0).unwrap();
    assert_eq!(lost, Lost { files: 1, pages: 1, appended_bytes: 3_000 });
    assert_eq!(std::fs::read(&path).unwrap(), synced, "the file is what was synced");
    watch.restore_power();
}

#[test]
fn a_synced_write_survives_and_a_torn_append_keeps_whole_sectors() {
    let _turn = ONE_AT_A_TIME.locked();
    let dir = tempfile::tempdir().unwrap();
    let watch = page_cache::watch(dir.path()).unwrap();
    let path = dir.path().join("log");
    write_synced(&path, &[1; 1_000]);

    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&[2; 2_000]).unwrap();
    file.sync_data().unwrap(); // durable
    file.write_all(&[3; 1_500]).unwrap(); // not

    // Of the unsynced 1 500 bytes (three sectors' worth), the draw keeps two sectors.
    let lost = watch.cut_power(&mut |sectors| {
        assert_eq!(sectors, 4, "none to all three sectors");
        2
    });
    assert_eq!(lost.unwrap(), Lost { files: 1, pages: 0, appended_bytes: 1_500 - 1_024 });
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 3_000 + 1_024);
    assert!(bytes[..1_000].iter().all(|b| *b == 1) && bytes[1_000..3_000].iter().all(|b| *b == 2));
    assert!(bytes[3_000..].iter().all(|b| *b == 3), "the kept sectors hold what was written there");
    watch.restore_power();
}

#[test]
fn a_write_on_a_dsync_descriptor_is_durable_when_it_returns() {
    let _turn = ONE_AT_A_TIME.locked();
    let dir = tempfile::tempdir().unwrap();
    let watch = page_cache::watch(dir.path()).unwrap();
    let path = dir.path().join("meta");
    write_synced(&path, &[0; 8_192]);

    // An unsynced write to the first page, then a synced one over part of it (LMDB's meta page
    // through its O_DSYNC descriptor).
    let plain = OpenOptions::new().write(true).open(&path).unwrap();
    plain.write_all_at(&[7; 4_096], 0).unwrap();
    let dsync = OpenOptions::new().write(true).custom_flags(libc_o_dsync()).open(&path).unwrap();
    dsync.write_all_at(&[9; 16], 100).unwrap();

    let lost = watch.cut_power(&mut |_| 0).unwrap();
    assert_eq!(lost, Lost { files: 1, pages: 1, appended_bytes: 0 });
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes[..100].iter().all(|b| *b == 0), "the unsynced write is undone");
    assert!(bytes[100..116].iter().all(|b| *b == 9), "the synced write stays");
    assert!(bytes[116..].iter().all(|b| *b == 0));
    watch.restore_power();
}

#[test]
fn nothing_lands_while_the_power_is_out_and_everything_does_after() {
    let _turn = ONE_AT_A_TIME.locked();
    let dir = tempfile::tempdir().unwrap();
    let watch = page_cache::watch(dir.path()).unwrap();
    let path = dir.path().join("wal");
    write_synced(&path, b"synced");
    let kept = dir.path().join("kept");
    write_synced(&kept, b"kept");

    assert_eq!(watch.cut_power(&mut |_| 0).unwrap(), Lost::default(), "every write was synced");
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b" and more").unwrap();
    file.sync_all().unwrap();
    std::fs::remove_file(&kept).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"synced", "a dying process's write does not land");
    assert!(kept.exists(), "nor does its unlink");

    watch.restore_power();
    file.write_all(b"!").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"synced!");
    // Outside a watched directory nothing is kept or dropped.
    let outside = tempfile::tempdir().unwrap();
    let mut other = File::create(outside.path().join("f")).unwrap();
    other.write_all(b"x").unwrap();
    assert_eq!(watch.cut_power(&mut |_| 0).unwrap(), Lost { files: 1, pages: 0, appended_bytes: 1 });
    assert_eq!(std::fs::read(outside.path().join("f")).unwrap(), b"x");
}

fn libc_o_dsync() -> i32 {
    0o10000 // O_DSYNC on Linux
}
