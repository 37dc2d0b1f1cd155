//! Who else has the card open: the processes that hold one of the card's
//! files (NVIDIA's device nodes, the function's sysfs resources) in a
//! descriptor or a mapping, other than the runner and the step it started.
//! Read from /proc, so Linux only; elsewhere the card lock is the only
//! evidence, and the runner says so.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A process seen with one of the card's files open.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CardUser {
    pub pid: u32,
    pub name: String,
    pub file: String,
}

/// The files that mean "has this card open", by path prefix.
#[derive(Debug, Clone)]
pub struct CardFiles {
    prefixes: Vec<String>,
}

impl CardFiles {
    pub fn new(prefixes: Vec<String>) -> CardFiles {
        CardFiles { prefixes }
    }

    /// Nothing to look for (a card reached over a socket).
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    fn matches(&self, path: &str) -> bool {
        self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
    }
}

/// Whether this system has a /proc to look in.
pub fn can_look(proc_root: &Path) -> bool {
    proc_root.join("self").join("fd").is_dir()
}

/// Every process under `proc_root` holding one of `files`, except `runner`
/// and the processes descended from `step`.
pub fn other_users(proc_root: &Path, files: &CardFiles, runner: u32, step: u32) -> Vec<CardUser> {
    if files.is_empty() {
        return Vec::new();
    }
    let pids = all_pids(proc_root);
    let parents: BTreeMap<u32, u32> = pids
        .iter()
        .filter_map(|&pid| parent_of(proc_root, pid).map(|pp| (pid, pp)))
        .collect();
    let mut users = BTreeSet::new();
    for &pid in &pids {
        if pid == runner || descends_from(pid, step, &parents) {
            continue;
        }
        if let Some(file) = open_card_file(proc_root, pid, files) {
            users.insert(CardUser {
                pid,
                name: name_of(proc_root, pid),
                file,
            });
        }
    }
    users.into_iter().collect()
}

fn all_pids(proc_root: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The parent pid from /proc/PID/stat: the field after the command name,
/// which sits in parentheses and may itself hold spaces and parentheses.
fn parent_of(proc_root: &Path, pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

/// Whether `pid` is `ancestor` or below it. Bounded by the table's size, so
/// a cycle in a racing snapshot cannot loop.
fn descends_from(pid: u32, ancestor: u32, parents: &BTreeMap<u32, u32>) -> bool {
    let mut at = pid;
    for _ in 0..=parents.len() {
        if at == ancestor {
            return true;
        }
        match parents.get(&at) {
            Some(&up) if up != at => at = up,
            _ => return false,
        }
    }
    false
}

fn name_of(proc_root: &Path, pid: u32) -> String {
    fs::read_to_string(proc_root.join(pid.to_string()).join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".to_string())
}

/// The first of the card's files `pid` holds in a descriptor or a mapping.
/// Processes we may not look into are passed over.
fn open_card_file(proc_root: &Path, pid: u32, files: &CardFiles) -> Option<String> {
    let dir = proc_root.join(pid.to_string());
    if let Ok(fds) = fs::read_dir(dir.join("fd")) {
        for fd in fds.flatten() {
            if let Ok(target) = fs::read_link(fd.path()) {
                let target = target.to_string_lossy();
                if files.matches(&target) {
                    return Some(target.into_owned());
                }
            }
        }
    }
    let maps = fs::read_to_string(dir.join("maps")).ok()?;
    maps.lines()
        // The path is the sixth field and may hold spaces.
        .filter_map(|l| l.splitn(6, char::is_whitespace).nth(5).map(str::trim))
        .find(|p| files.matches(p))
        .map(str::to_string)
}

/// The files of NVIDIA's kernel module a process driving card `index`
/// holds.
pub fn kernel_module_files(index: u32) -> CardFiles {
    CardFiles::new(vec![
        format!("/dev/nvidia{index}"),
        "/dev/nvidiactl".to_string(),
        "/dev/nvidia-uvm".to_string(),
    ])
}

/// The sysfs files of PCI function `bdf` a userspace driver maps.
pub fn sysfs_files(devices: &Path, bdf: &str) -> CardFiles {
    let mut dir = PathBuf::from(devices).join(bdf);
    // Mappings and descriptors name the resolved path.
    if let Ok(real) = fs::canonicalize(&dir) {
        dir = real;
    }
    CardFiles::new(vec![dir.join("resource").to_string_lossy().into_owned()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// One process of a fake /proc: pid, parent, name, fd targets, mapped
    /// paths.
    type FakeProcess<'a> = (u32, u32, &'a str, &'a [&'a str], &'a [&'a str]);

    fn fake_proc(procs: &[FakeProcess]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for &(pid, parent, name, fds, maps) in procs {
            let dir = root.path().join(pid.to_string());
            fs::create_dir_all(dir.join("fd")).unwrap();
            fs::write(
                dir.join("stat"),
                format!("{pid} ({name} x) S {parent} 1 1 0\n"),
            )
            .unwrap();
            fs::write(dir.join("comm"), format!("{name}\n")).unwrap();
            for (i, target) in fds.iter().enumerate() {
                symlink(target, dir.join("fd").join(i.to_string())).unwrap();
            }
            let lines: String = maps
                .iter()
                .map(|p| format!("7f00-7f10 rw-s 00000000 00:05 12 {p}\n"))
                .collect();
            fs::write(dir.join("maps"), lines).unwrap();
        }
        root
    }

    #[test]
    fn finds_strangers_but_not_the_runner_or_the_steps_tree() {
        let proc_root = fake_proc(&[
            (1, 0, "init", &[], &[]),
            (10, 1, "macuda", &["/dev/nvidiactl"], &[]),
            (11, 10, "sh", &[], &[]),
            (12, 11, "llama-simple", &["/dev/nvidia0", "/dev/null"], &[]),
            (20, 1, "python3", &["/dev/null", "/dev/nvidia0"], &[]),
            (21, 1, "other-card", &["/dev/nvidia1"], &[]),
            (30, 1, "mapper", &[], &["/dev/nvidiactl"]),
        ]);
        let users = other_users(proc_root.path(), &kernel_module_files(0), 10, 11);
        assert_eq!(
            users,
            vec![
                CardUser {
                    pid: 20,
                    name: "python3".into(),
                    file: "/dev/nvidia0".into()
                },
                CardUser {
                    pid: 30,
                    name: "mapper".into(),
                    file: "/dev/nvidiactl".into()
                },
            ]
        );
    }

    #[test]
    fn a_parent_cycle_does_not_loop() {
        let parents: BTreeMap<u32, u32> = [(5, 6), (6, 5)].into_iter().collect();
        assert!(!descends_from(5, 7, &parents));
        assert!(descends_from(5, 6, &parents));
    }

    #[test]
    fn names_with_parentheses_and_spaces_keep_the_parent_right() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("42");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("stat"), "42 (a) b (c)) S 7 1 1\n").unwrap();
        assert_eq!(parent_of(root.path(), 42), Some(7));
    }

    #[test]
    fn socket_cards_have_nothing_to_look_for() {
        let proc_root = fake_proc(&[(20, 1, "x", &["/dev/nvidia0"], &[])]);
        assert!(other_users(proc_root.path(), &CardFiles::new(Vec::new()), 1, 2).is_empty());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_system_is_seen_as_its_own_user_of_its_own_files() {
        // On Linux: this test process holds a file; a scan for it from
        // another runner finds this process.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card-file");
        fs::write(&path, "x").unwrap();
        let _open = fs::File::open(&path).unwrap();
        let proc_root = Path::new("/proc");
        assert!(can_look(proc_root));
        let files = CardFiles::new(vec![path.to_string_lossy().into_owned()]);
        let me = std::process::id();
        let users = other_users(proc_root, &files, u32::MAX, u32::MAX - 1);
        assert!(users.iter().any(|u| u.pid == me), "{users:?}");
        assert!(other_users(proc_root, &files, me, u32::MAX - 1).is_empty());
    }
}
