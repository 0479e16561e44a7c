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

/// Writes `path` and syncs it and its directory: durable, name and bytes.
fn write_synced(path: &Path, bytes: &[u8]) {
    write_file_synced(path, bytes);
    sync_dir(path.parent().unwrap());
}

/// Writes `path` and syncs the file, not its directory: the bytes are durable, the name not.
fn write_file_synced(path: &Path, bytes: &[u8]) {
    let mut file = File::create(path).unwrap();
    file.write_all(bytes).unwrap();
    file.sync_all().unwrap();
}

fn sync_dir(dir: &Path) {
    File::open(dir).unwrap().sync_all().unwrap();
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
    assert_eq!(lost, Lost { files: 1, pages: 1, appended_bytes: 3_000, entries: 0 });
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
    assert_eq!(lost.unwrap(), Lost { files: 1, pages: 0, appended_bytes: 1_500 - 1_024, entries: 0 });
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
    assert_eq!(lost, Lost { files: 1, pages: 1, appended_bytes: 0, entries: 0 });
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
    assert_eq!(watch.cut_power(&mut |_| 0).unwrap(), Lost { files: 1, pages: 0, appended_bytes: 1, entries: 0 });
    assert_eq!(std::fs::read(outside.path().join("f")).unwrap(), b"x");
}

/// A power loss on a fresh watch of a fresh folder after `setup`, every group of directory
/// changes drawn `undone` (or landed); returns the folder and what was lost.
fn cut_after(undone: bool, setup: impl FnOnce(&Path)) -> (tempfile::TempDir, Lost) {
    let dir = tempfile::tempdir().unwrap();
    let watch = page_cache::watch(dir.path()).unwrap();
    setup(dir.path());
    let lost = watch.cut_power(&mut |n| if n == 2 && !undone { 1 } else { 0 }).unwrap();
    watch.restore_power();
    drop(watch);
    (dir, lost)
}

#[test]
fn a_synced_file_whose_directory_was_not_synced_may_vanish_whole() {
    let _turn = ONE_AT_A_TIME.locked();
    let make = |dir: &Path| write_file_synced(&dir.join("data.mdb"), b"synced bytes");
    let (dir, lost) = cut_after(true, make);
    assert!(!dir.path().join("data.mdb").exists(), "its name never reached the disk");
    assert_eq!(lost.entries, 1);
    let (dir, lost) = cut_after(false, make);
    assert_eq!(std::fs::read(dir.path().join("data.mdb")).unwrap(), b"synced bytes", "drawn landed");
    assert_eq!(lost, Lost::default());
    // Synced, the directory keeps it whatever the draw.
    let (dir, _) = cut_after(true, |dir| write_synced(&dir.join("data.mdb"), b"synced bytes"));
    assert_eq!(std::fs::read(dir.path().join("data.mdb")).unwrap(), b"synced bytes");
}

#[test]
fn a_rename_into_place_is_undone_until_its_directory_is_synced() {
    let _turn = ONE_AT_A_TIME.locked();
    let swap = |dir: &Path| {
        write_synced(&dir.join("CURRENT"), b"old");
        write_file_synced(&dir.join("CURRENT.tmp"), b"new");
        std::fs::rename(dir.join("CURRENT.tmp"), dir.join("CURRENT")).unwrap();
    };
    let (dir, lost) = cut_after(true, swap);
    assert_eq!(std::fs::read(dir.path().join("CURRENT")).unwrap(), b"old", "the file it replaced is back");
    assert!(!dir.path().join("CURRENT.tmp").exists(), "made since the sync: gone");
    assert_eq!(lost.entries, 2, "the new name taken away, the old put back");
    let (dir, _) = cut_after(true, |dir| {
        swap(dir);
        sync_dir(dir);
    });
    assert_eq!(std::fs::read(dir.path().join("CURRENT")).unwrap(), b"new");
}

#[test]
fn an_unlinked_file_and_a_removed_directory_come_back_until_the_parent_is_synced() {
    let _turn = ONE_AT_A_TIME.locked();
    // Made and synced, then removed.
    let build = |dir: &Path| {
        std::fs::create_dir(dir.join("snapshots")).unwrap();
        write_synced(&dir.join("snapshots/00042.snap"), b"snapshot");
        write_synced(&dir.join("cursor"), b"42");
        std::fs::remove_dir_all(dir.join("snapshots")).unwrap();
        std::fs::remove_file(dir.join("cursor")).unwrap();
    };
    let (dir, lost) = cut_after(true, build);
    assert_eq!(std::fs::read(dir.path().join("snapshots/00042.snap")).unwrap(), b"snapshot");
    assert_eq!(std::fs::read(dir.path().join("cursor")).unwrap(), b"42");
    assert_eq!(lost.entries, 3);
    let (dir, _) = cut_after(true, |dir| {
        build(dir);
        sync_dir(dir);
    });
    assert!(!dir.path().join("snapshots").exists() && !dir.path().join("cursor").exists());
}

#[test]
fn a_store_swapped_by_two_directory_renames_is_all_old_or_all_new() {
    let _turn = ONE_AT_A_TIME.locked();
    // The node's store swap: live → retired, then the new copy → live.
    let swap = |dir: &Path| {
        std::fs::create_dir(dir.join("live")).unwrap();
        write_synced(&dir.join("live/data"), b"old store");
        std::fs::create_dir(dir.join("incoming")).unwrap();
        write_synced(&dir.join("incoming/data"), b"new store");
        sync_dir(dir);
        std::fs::rename(dir.join("live"), dir.join("retired")).unwrap();
        std::fs::rename(dir.join("incoming"), dir.join("live")).unwrap();
    };
    let (dir, lost) = cut_after(true, swap);
    assert_eq!(std::fs::read(dir.path().join("live/data")).unwrap(), b"old store");
    assert_eq!(std::fs::read(dir.path().join("incoming/data")).unwrap(), b"new store");
    assert!(!dir.path().join("retired").exists());
    assert_eq!(lost.entries, 4, "retired and live taken away, live and incoming put back");
    let (dir, _) = cut_after(false, swap);
    assert_eq!(std::fs::read(dir.path().join("live/data")).unwrap(), b"new store");
    assert_eq!(std::fs::read(dir.path().join("retired/data")).unwrap(), b"old store");
}

#[test]
fn a_rename_between_directories_is_undone_whole_and_durable_once_either_side_syncs() {
    let _turn = ONE_AT_A_TIME.locked();
    let build = |dir: &Path| {
        std::fs::create_dir(dir.join("a")).unwrap();
        std::fs::create_dir(dir.join("b")).unwrap();
        write_synced(&dir.join("a/x"), b"x");
        sync_dir(dir);
        std::fs::rename(dir.join("a/x"), dir.join("b/x")).unwrap();
    };
    let (dir, lost) = cut_after(true, build);
    assert!(dir.path().join("a/x").exists() && !dir.path().join("b/x").exists(), "undone, both halves");
    assert_eq!(lost.entries, 2);
    let (dir, _) = cut_after(false, build);
    assert!(!dir.path().join("a/x").exists() && dir.path().join("b/x").exists(), "landed, both halves");
    let (dir, _) = cut_after(true, |dir| {
        build(dir);
        sync_dir(&dir.join("b"));
    });
    assert!(!dir.path().join("a/x").exists() && dir.path().join("b/x").exists(), "b synced: both halves durable");
}

fn libc_o_dsync() -> i32 {
    0o10000 // O_DSYNC on Linux
}
