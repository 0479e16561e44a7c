//! Directory entries at a power loss: creating, renaming and unlinking a file or a directory
//! change its parent directory, and the change is durable only once that directory is synced.
//!
//! The model is POSIX's strict one, as RocksDB's `FaultInjectionTestFS`
//! (`DeleteFilesCreatedAfterLastDirSync`) and the ALICE study take it, with one concession to
//! every journaling file system: a rename is one operation, so syncing either of its two
//! directories makes both halves durable (the entry gone from the old one, there in the new).
//!
//! Guarantees, for every directory under a watched root:
//! - its durable listing is what it held when it was last synced (`fsync` or `fdatasync` on a
//!   descriptor of the directory), when the watch began, or when the power last came back; a
//!   directory made since and never synced durably holds nothing;
//! - at the cut, the directories whose listing differs from the durable one are grouped — two
//!   directories whose changes moved one file or directory between them are one group, so a
//!   rename is never half undone — and each group is drawn: its changes all landed, or all are
//!   undone. Undone, every entry made since is taken away (a file created and synced but never
//!   named durably is gone), every entry removed or replaced since is back, and every rename is
//!   reversed; the groups are drawn in path order;
//! - what an undone entry needs exists: a file or a directory that a durable listing names is
//!   never freed while the power is on — unlinking its last name links it into the root's
//!   *aside* folder first, removing it (`rmdir`, or `unlinkat` with `AT_REMOVEDIR`) moves it
//!   there instead — so its inode is not reused, and it is there to be put back. What a
//!   directory sync leaves no durable listing naming is let go.
//!
//! The aside folder sits beside the root (`.<root name>.qsim-aside`), on its file system and
//! outside everything the node lists. Directories themselves are entries like files: a
//! directory made and never named durably vanishes with what it holds.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::FileId;

/// One entry of a directory: the file or directory it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) id: FileId,
    pub(super) dir: bool,
}

/// A directory's entries by name.
pub(super) type Listing = BTreeMap<OsString, Entry>;

/// The durable side of every watched root's directories.
#[derive(Debug, Default)]
pub(super) struct Entries {
    /// Each directory's durable listing, by the directory's inode.
    durable: BTreeMap<FileId, Listing>,
    /// Files and directories a durable listing names that have no other name left: their
    /// name in the aside folder.
    aside: BTreeMap<FileId, PathBuf>,
}

/// What a cut did to the entries.
#[derive(Debug, Default)]
pub(super) struct Cut {
    /// Entries undone: taken away, or put back.
    pub(super) undone: u64,
    /// Files whose last name went with the aside folder: their inodes may be reused.
    pub(super) freed: Vec<FileId>,
}

/// The folder beside `root` that keeps what the cut may need back.
pub(super) fn aside_of(root: &Path) -> PathBuf {
    let name = root.file_name().map_or_else(|| OsString::from("root"), OsStr::to_os_string);
    let mut aside = OsString::from(".");
    aside.push(name);
    aside.push(".qsim-aside");
    root.parent().unwrap_or(Path::new("/")).join(aside)
}

fn id_of(meta: &std::fs::Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

/// What `dir` holds now (names in order).
fn listing(dir: &Path) -> std::io::Result<Listing> {
    let mut listing = Listing::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
        listing.insert(entry.file_name(), Entry { id: id_of(&meta), dir: meta.is_dir() });
    }
    Ok(listing)
}

impl Entries {
    /// Takes every directory under `root` (itself included) as durable: the watch begins, or the
    /// power came back and the disk is what it holds.
    pub(super) fn take_durable(&mut self, root: &Path) -> std::io::Result<()> {
        let id = id_of(&std::fs::metadata(root)?);
        let held = listing(root)?;
        for (name, entry) in &held {
            if entry.dir {
                self.take_durable(&root.join(name))?;
            }
        }
        self.durable.insert(id, held);
        Ok(())
    }

    /// Forgets every directory under `root` and what was set aside for it (the watch ends).
    pub(super) fn forget(&mut self, root: &Path) {
        let aside = aside_of(root);
        let _ = std::fs::remove_dir_all(&aside);
        self.aside.retain(|_, path| !path.starts_with(&aside));
        if let Ok(meta) = std::fs::metadata(root) {
            let mut ids = vec![id_of(&meta)];
            while let Some(id) = ids.pop() {
                if let Some(listing) = self.durable.remove(&id) {
                    ids.extend(listing.values().filter(|e| e.dir).map(|e| e.id));
                }
            }
        }
    }

    fn durably_named(&self, id: FileId) -> bool {
        self.durable.values().any(|listing| listing.values().any(|e| e.id == id))
    }

    /// The directory `dir` (inode `id`, under `root`) was synced: its listing is durable, and so
    /// is each rename it took part in, on its other side too.
    pub(super) fn synced_dir(&mut self, root: &Path, id: FileId, dir: &Path) -> std::io::Result<Vec<FileId>> {
        let now = listing(dir)?;
        let before = self.durable.remove(&id).unwrap_or_default();
        // Renamed in: named nowhere else durably any more — a directory has one name, and a
        // file whose only name is this one now has lost every other.
        let came: BTreeSet<FileId> = now
            .iter()
            .filter(|(name, e)| before.get(*name) != Some(e))
            .filter(|(name, e)| e.dir || std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.nlink() == 1))
            .map(|(_, e)| e.id)
            .collect();
        if !came.is_empty() {
            for held in self.durable.values_mut() {
                held.retain(|_, e| !came.contains(&e.id));
            }
        }
        // Renamed out: wherever it is named now, durably so.
        let went: BTreeSet<FileId> = before
            .iter()
            .filter(|(name, e)| now.get(*name) != Some(e) && !now.values().any(|n| n.id == e.id))
            .map(|(_, e)| e.id)
            .collect();
        if !went.is_empty() {
            let mut found = Vec::new();
            names_under(root, &went, &mut found)?;
            for (parent, name, entry) in found {
                if parent != id {
                    self.durable.entry(parent).or_default().insert(name, entry);
                }
            }
        }
        self.durable.insert(id, now);
        self.let_go()
    }

    /// Unlinks from the aside folder what no durable listing names any more; returns the files
    /// so freed.
    fn let_go(&mut self) -> std::io::Result<Vec<FileId>> {
        let named: BTreeSet<FileId> = self.durable.values().flat_map(|l| l.values().map(|e| e.id)).collect();
        let free: Vec<FileId> = self.aside.keys().filter(|id| !named.contains(id)).copied().collect();
        let mut freed = Vec::new();
        for id in free {
            let path = self.aside.remove(&id).expect("listed");
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.is_dir() {
                freed.extend(remove_tree(&path)?);
                self.durable.remove(&id);
            } else {
                if meta.nlink() <= 1 {
                    freed.push(id);
                }
                std::fs::remove_file(&path)?;
            }
        }
        Ok(freed)
    }

    /// Before the entry `path` goes (unlink, or replaced by a rename): a file a durable listing
    /// names, losing its last name, is linked aside first.
    pub(super) fn before_unlink(&mut self, root: &Path, path: &Path) -> std::io::Result<()> {
        let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
        let id = id_of(&meta);
        if meta.is_dir() || self.aside.contains_key(&id) || !self.durably_named(id) {
            return Ok(());
        }
        let kept = aside_name(root, id);
        std::fs::create_dir_all(aside_of(root))?;
        std::fs::hard_link(path, &kept)?;
        self.aside.insert(id, kept);
        Ok(())
    }

    /// Instead of removing the directory `path`: a directory a durable listing names is moved
    /// aside (`true`: the caller reports the removal done). One nobody names durably is
    /// removed, and its listing forgotten (its inode may be reused).
    pub(super) fn instead_of_rmdir(&mut self, root: &Path, path: &Path) -> std::io::Result<bool> {
        let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(false) };
        let id = id_of(&meta);
        if !meta.is_dir() {
            return Ok(false);
        }
        if !self.durably_named(id) {
            self.durable.remove(&id);
            return Ok(false);
        }
        if std::fs::read_dir(path)?.next().is_some() {
            return Ok(false); // not empty: rmdir fails as it would
        }
        let kept = aside_name(root, id);
        std::fs::create_dir_all(aside_of(root))?;
        std::fs::rename(path, &kept)?;
        self.aside.insert(id, kept);
        Ok(true)
    }

    /// The power goes out under `root`: each group of directories whose entries changed since
    /// they were synced is drawn (`draw(2)`: 0 undone, 1 landed) and the undone ones put back.
    /// Returns how many entries were undone. Afterwards the disk is all durable.
    pub(super) fn cut(&mut self, root: &Path, draw: &mut dyn FnMut(u64) -> u64) -> std::io::Result<Cut> {
        let aside = aside_of(root);
        std::fs::create_dir_all(&aside)?;
        let mut tree = Tree::walk(root, &aside)?;
        let root_id = tree.root;
        // The directories that matter: under the root now, or durably.
        let mut dirs: BTreeMap<FileId, PathBuf> = BTreeMap::new(); // → a path to order the draws by
        tree.under_root(root_id, PathBuf::new(), &mut dirs);
        self.durably_under(root_id, PathBuf::new(), &mut dirs);
        let empty = Listing::new();
        let pending: Vec<FileId> = dirs
            .keys()
            .filter(|id| tree.listings.get(id).unwrap_or(&empty) != self.durable.get(id).unwrap_or(&empty))
            .copied()
            .collect();
        let groups = self.groups(&tree, &pending, &dirs);
        let mut undone = 0u64;
        let mut undo: Vec<FileId> = Vec::new();
        for group in groups {
            if draw(2) == 0 {
                undo.extend(group);
            }
        }
        // Out of the way first: every entry an undone directory holds that it did not durably.
        for id in &undo {
            let Some(now) = tree.listings.get(id).cloned() else { continue };
            let held = self.durable.get(id).unwrap_or(&empty);
            for (name, entry) in now {
                if held.get(&name) != Some(&entry) {
                    tree.set_aside(*id, &name, entry, &aside)?;
                    undone += 1;
                }
            }
        }
        // Then back: directories first (a file's other names may sit inside one), then files.
        for want_dir in [true, false] {
            for id in &undo {
                let held = self.durable.get(id).cloned().unwrap_or_default();
                for (name, entry) in held.into_iter().filter(|(_, e)| e.dir == want_dir) {
                    if tree.listings.get(id).and_then(|l| l.get(&name)) == Some(&entry) {
                        continue;
                    }
                    tree.put_back(*id, name, entry, &self.aside)?;
                    undone += 1;
                }
            }
        }
        // What was set aside and not put back is lost; the disk is what it holds.
        let freed = remove_tree(&aside)?;
        self.aside.retain(|_, path| !path.starts_with(&aside));
        self.forget_listings_under(root_id);
        self.take_durable(root)?;
        Ok(Cut { undone, freed })
    }

    fn forget_listings_under(&mut self, root_id: FileId) {
        let mut ids = vec![root_id];
        while let Some(id) = ids.pop() {
            if let Some(listing) = self.durable.remove(&id) {
                ids.extend(listing.values().filter(|e| e.dir).map(|e| e.id));
            }
        }
    }

    /// Every directory durably under `id`, with its durable path where it has no path under
    /// the root now.
    fn durably_under(&self, id: FileId, path: PathBuf, out: &mut BTreeMap<FileId, PathBuf>) {
        let mut seen = BTreeSet::new();
        let mut stack = vec![(id, path)];
        while let Some((id, path)) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            out.entry(id).or_insert_with(|| path.clone());
            if let Some(listing) = self.durable.get(&id) {
                stack.extend(listing.iter().filter(|(_, e)| e.dir).map(|(name, e)| (e.id, path.join(name))));
            }
        }
    }

    /// The pending directories in groups: two share a group when a file or directory is named
    /// by one's listing (now or durably) and the other's. Groups in the order of their first
    /// path.
    fn groups(&self, tree: &Tree, pending: &[FileId], paths: &BTreeMap<FileId, PathBuf>) -> Vec<Vec<FileId>> {
        let empty = Listing::new();
        let mut group_of: BTreeMap<FileId, usize> = pending.iter().enumerate().map(|(n, id)| (*id, n)).collect();
        let mut by_entry: BTreeMap<FileId, Vec<FileId>> = BTreeMap::new();
        for dir in pending {
            let now = tree.listings.get(dir).unwrap_or(&empty);
            let held = self.durable.get(dir).unwrap_or(&empty);
            for entry in now.values().chain(held.values()) {
                by_entry.entry(entry.id).or_default().push(*dir);
            }
        }
        // Union by relabelling (few directories change between syncs).
        for dirs in by_entry.values() {
            let target = group_of[&dirs[0]];
            for dir in &dirs[1..] {
                let from = group_of[dir];
                if from != target {
                    for group in group_of.values_mut() {
                        if *group == from {
                            *group = target;
                        }
                    }
                }
            }
        }
        let mut groups: BTreeMap<usize, Vec<FileId>> = BTreeMap::new();
        for (dir, group) in group_of {
            groups.entry(group).or_default().push(dir);
        }
        let mut groups: Vec<Vec<FileId>> = groups.into_values().collect();
        for group in &mut groups {
            group.sort_by(|a, b| paths[a].cmp(&paths[b]));
        }
        groups.sort_by(|a, b| paths[&a[0]].cmp(&paths[&b[0]]));
        groups
    }
}

/// Removes `dir` and everything under it; returns the files whose last name went.
fn remove_tree(dir: &Path) -> std::io::Result<Vec<FileId>> {
    let mut freed = Vec::new();
    for (name, entry) in listing(dir)? {
        let path = dir.join(name);
        if entry.dir {
            freed.extend(remove_tree(&path)?);
        } else {
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.nlink() <= 1) {
                freed.push(entry.id);
            }
            std::fs::remove_file(&path)?;
        }
    }
    std::fs::remove_dir(dir)?;
    Ok(freed)
}

/// `id`'s name in `root`'s aside folder.
fn aside_name(root: &Path, id: FileId) -> PathBuf {
    aside_of(root).join(format!("kept-{}-{}", id.0, id.1))
}

/// Every name under `dir` (its subdirectories' too) of a file or directory in `ids`: the
/// directory that holds it, the name, the entry.
fn names_under(dir: &Path, ids: &BTreeSet<FileId>, out: &mut Vec<(FileId, OsString, Entry)>) -> std::io::Result<()> {
    let id = id_of(&std::fs::metadata(dir)?);
    for (name, entry) in listing(dir)? {
        if entry.dir {
            names_under(&dir.join(&name), ids, out)?;
        }
        if ids.contains(&entry.id) {
            out.push((id, name, entry));
        }
    }
    Ok(())
}

/// The directories under the root and the aside folder as they are now, kept up to date as
/// the cut moves entries.
struct Tree {
    root: FileId,
    /// Each directory's path.
    paths: BTreeMap<FileId, PathBuf>,
    /// Each directory's entries.
    listings: BTreeMap<FileId, Listing>,
    /// A path to each file (any of its names).
    files: BTreeMap<FileId, PathBuf>,
    /// Entries set aside so far.
    set_aside: u64,
}

impl Tree {
    fn walk(root: &Path, aside: &Path) -> std::io::Result<Tree> {
        let root_id = id_of(&std::fs::metadata(root)?);
        let mut tree = Tree {
            root: root_id,
            paths: BTreeMap::new(),
            listings: BTreeMap::new(),
            files: BTreeMap::new(),
            set_aside: 0,
        };
        tree.visit(root)?;
        tree.visit(aside)?;
        Ok(tree)
    }

    fn visit(&mut self, dir: &Path) -> std::io::Result<()> {
        let id = id_of(&std::fs::metadata(dir)?);
        let held = listing(dir)?;
        for (name, entry) in &held {
            if entry.dir {
                self.visit(&dir.join(name))?;
            } else {
                self.files.entry(entry.id).or_insert_with(|| dir.join(name));
            }
        }
        self.paths.insert(id, dir.to_path_buf());
        self.listings.insert(id, held);
        Ok(())
    }

    /// Every directory under `id` now, with its path below the root.
    fn under_root(&self, id: FileId, path: PathBuf, out: &mut BTreeMap<FileId, PathBuf>) {
        out.insert(id, path.clone());
        if let Some(listing) = self.listings.get(&id) {
            for (name, entry) in listing.iter().filter(|(_, e)| e.dir) {
                self.under_root(entry.id, path.join(name), out);
            }
        }
    }

    /// Moves `dir`'s entry `name` into the aside folder.
    fn set_aside(&mut self, dir: FileId, name: &OsStr, entry: Entry, aside: &Path) -> std::io::Result<()> {
        let from = self.paths[&dir].join(name);
        let to = aside.join(format!("undone-{}", self.set_aside));
        self.set_aside += 1;
        std::fs::rename(&from, &to)?;
        self.listings.get_mut(&dir).expect("walked").remove(name);
        self.moved(entry, &from, &to);
        Ok(())
    }

    /// Names `entry` `name` in `dir` again: a directory moved from wherever it is, a file linked
    /// from any name it has (the aside folder's included).
    fn put_back(
        &mut self,
        dir: FileId,
        name: OsString,
        entry: Entry,
        kept: &BTreeMap<FileId, PathBuf>,
    ) -> std::io::Result<()> {
        let parent = self.paths.get(&dir).cloned().ok_or_else(|| lost(dir))?;
        let to = parent.join(&name);
        if entry.dir {
            let from = self.paths.get(&entry.id).cloned().or_else(|| kept.get(&entry.id).cloned());
            let from = from.ok_or_else(|| lost(entry.id))?;
            std::fs::rename(&from, &to)?;
            if let Some(old_parent) = from.parent().and_then(|p| self.paths.iter().find(|(_, q)| *q == p)) {
                let old_parent = *old_parent.0;
                if let Some(listing) = self.listings.get_mut(&old_parent) {
                    listing.retain(|_, e| e.id != entry.id);
                }
            }
            self.moved(entry, &from, &to);
        } else {
            let from = self.files.get(&entry.id).cloned().or_else(|| kept.get(&entry.id).cloned());
            std::fs::hard_link(from.ok_or_else(|| lost(entry.id))?, &to)?;
        }
        self.listings.get_mut(&dir).expect("has a path, so walked").insert(name, entry);
        Ok(())
    }

    /// Follows a rename of `entry` from `from` to `to` in the paths kept.
    fn moved(&mut self, entry: Entry, from: &Path, to: &Path) {
        if !entry.dir {
            if self.files.get(&entry.id).is_some_and(|p| p == from) {
                self.files.insert(entry.id, to.to_path_buf());
            }
            return;
        }
        for path in self.paths.values_mut().chain(self.files.values_mut()) {
            if let Ok(rest) = path.strip_prefix(from) {
                *path = to.join(rest);
            }
        }
    }
}

fn lost(id: FileId) -> std::io::Error {
    std::io::Error::other(format!(
        "the page cache lost track of inode {} (device {}), which a durable directory names",
        id.1, id.0
    ))
}
