//! One process per card. Two drivers booting or resetting the same GPU at
//! once wreck it, so every process that opens a card first takes an
//! exclusive `flock` on a lock file named after the card, and writes its pid
//! there so that a refused process can say who holds the card.
//!
//! The `flock` is what counts: the kernel drops it when its holder exits,
//! however it exits. The pid in the file is only a note; one left behind by
//! a process that died without clearing it (SIGKILL, power loss in a
//! container) is taken over and reported by [`CardLock::took_over_from`].
//!
//! `macuda run` holds a card for a whole step and runs the step as its own
//! process, which opens the card again. The runner hands its lock down: the
//! child inherits a descriptor of the same open lock file, named by
//! [`HANDED_LOCK_VAR`], and a lock taken in the child finds the card held
//! by that descriptor and adopts it instead of being refused.

use crate::error::PciError;
use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::fcntl::{Flock, FlockArg};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The environment variable naming the lock directory.
pub const LOCK_DIR_VAR: &str = "MACUDA_LOCK_DIR";

/// The environment variable through which a holder hands its lock down to
/// a child process: the number of an inherited descriptor of the lock file.
pub const HANDED_LOCK_VAR: &str = "MACUDA_CARD_LOCK_FD";

/// Exclusive use of one card by this process, until dropped.
#[derive(Debug)]
pub struct CardLock {
    hold: Hold,
    path: PathBuf,
    took_over_from: Option<u32>,
}

/// How this process holds the card.
#[derive(Debug)]
enum Hold {
    /// Its own lock on the file; the pid in the file is ours.
    Own(Flock<File>),
    /// A parent's lock, through the inherited descriptor (its number); the
    /// pid in the file stays the parent's, and so does the lock when this
    /// one is dropped.
    HandedDown(RawFd),
}

/// A descriptor of a held lock that a child process inherits (no
/// close-on-exec), with the variable that names it to the child. Keep it
/// until the child has started.
#[derive(Debug)]
pub struct HandedLock {
    file: File,
}

impl HandedLock {
    /// The environment entry that names the inherited descriptor.
    pub fn env(&self) -> (&'static str, String) {
        (HANDED_LOCK_VAR, self.file.as_raw_fd().to_string())
    }
}

impl CardLock {
    /// Take the card named `card` (any text, e.g. `sysfs:0000:01:00.0`),
    /// with the lock file `<dir>/<card>.lock`, every character of `card`
    /// outside `[A-Za-z0-9._-]` replaced by `_`. Creates `dir` if missing.
    /// Never waits.
    ///
    /// # Errors
    /// `CardBusy` (with the holder's pid as its file says, or `unknown`)
    /// when another open lock holds the card, in this process or another;
    /// `Os` when the directory or file cannot be created, read or written.
    pub fn acquire(dir: &Path, card: &str) -> Result<CardLock, PciError> {
        fs::create_dir_all(dir).map_err(|source| PciError::Os {
            what: format!("creating the lock directory {}", dir.display()),
            source,
        })?;
        let path = dir.join(lock_file_name(card));
        let os = |doing: &str| {
            let what = format!("{doing} the lock file {}", path.display());
            move |source| PciError::Os { what, source }
        };
        if let Some(fd) = handed_down(std::env::var(HANDED_LOCK_VAR).ok(), &path) {
            return Ok(CardLock {
                hold: Hold::HandedDown(fd),
                path,
                took_over_from: None,
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(os("opening"))?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => locked,
            Err((mut file, Errno::EWOULDBLOCK)) => {
                // The holder may be between taking the lock and writing its
                // pid; then the file is still empty.
                let mut text = String::new();
                file.read_to_string(&mut text).map_err(os("reading"))?;
                let pid = match text.trim() {
                    "" => "unknown".to_string(),
                    pid => pid.to_string(),
                };
                return Err(PciError::CardBusy { path, pid });
            }
            Err((_, errno)) => return Err(os("locking")(errno.into())),
        };

        let mut text = String::new();
        file.read_to_string(&mut text).map_err(os("reading"))?;
        let took_over_from = match text.trim() {
            "" => None,
            left => match left.parse::<u32>() {
                Ok(pid) => {
                    if process_exists(pid) {
                        tracing::warn!(
                            lock = %path.display(),
                            pid,
                            "taking over a card lock that no process holds; its pid now names another process"
                        );
                    } else {
                        tracing::warn!(
                            lock = %path.display(),
                            pid,
                            "taking over the card from process {pid}, which exited without releasing it"
                        );
                    }
                    Some(pid)
                }
                Err(_) => {
                    tracing::warn!(lock = %path.display(), content = left, "taking over a card lock with unreadable content");
                    None
                }
            },
        };
        file.set_len(0).map_err(os("truncating"))?;
        file.write_all_at(format!("{}\n", std::process::id()).as_bytes(), 0)
            .map_err(os("writing this process's pid to"))?;
        Ok(CardLock {
            hold: Hold::Own(file),
            path,
            took_over_from,
        })
    }

    /// A descriptor of this lock for a child process to inherit, so that
    /// the child's own [`CardLock::acquire`] of the same card adopts it.
    ///
    /// # Errors
    /// `Os` when the descriptor cannot be duplicated or made inheritable.
    pub fn hand_down(&self) -> Result<HandedLock, PciError> {
        let os = |doing: &str| {
            let what = format!("{doing} the lock file {}", self.path.display());
            move |source| PciError::Os { what, source }
        };
        let file = match &self.hold {
            Hold::Own(file) => file.try_clone().map_err(os("duplicating"))?,
            // Hand on what was handed to us: a duplicate of the same open
            // file keeps the same lock.
            Hold::HandedDown(fd) => {
                let dup = nix::unistd::dup(*fd).map_err(|e| os("duplicating")(e.into()))?;
                // SAFETY: `dup` returned a new descriptor that nothing else owns.
                unsafe { File::from_raw_fd(dup) }
            }
        };
        // try_clone and the standard library set close-on-exec; the child
        // must inherit this one.
        fcntl(file.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::empty()))
            .map_err(|e| os("making inheritable")(e.into()))?;
        Ok(HandedLock { file })
    }

    /// Whether this process holds the card through a lock handed down by
    /// a parent (`macuda run`) rather than its own.
    pub fn is_handed_down(&self) -> bool {
        matches!(self.hold, Hold::HandedDown(_))
    }

    /// Whether this is the lock [`CardLock::acquire`] takes for `card` in
    /// `dir`.
    pub fn is_for(&self, dir: &Path, card: &str) -> bool {
        self.path == dir.join(lock_file_name(card))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pid a previous holder left in the lock file when this lock found
    /// the card free: that process ended without releasing the card. `None`
    /// when the file was new or clean.
    pub fn took_over_from(&self) -> Option<u32> {
        self.took_over_from
    }
}

impl Drop for CardLock {
    fn drop(&mut self) {
        // A handed-down lock stays the parent's, pid and all.
        let Hold::Own(file) = &self.hold else { return };
        // Clear the pid while still holding the lock; the lock itself goes
        // with the file descriptor right after. The file stays.
        if let Err(e) = file.set_len(0) {
            tracing::warn!(lock = %self.path.display(), error = %e, "could not clear the card lock file");
        }
    }
}

/// The inherited descriptor [`HANDED_LOCK_VAR`] names, if it is open on the
/// lock file at `path` and holds its lock. Anything else (no variable, a
/// number that is not a descriptor, another file, a descriptor whose lock
/// is someone else's) is ignored, and the lock is taken as usual.
fn handed_down(var: Option<String>, path: &Path) -> Option<RawFd> {
    let fd: RawFd = var?.trim().parse().ok()?;
    if fd < 0 {
        return None;
    }
    let inherited = nix::sys::stat::fstat(fd).ok()?;
    let on_disk = fs::metadata(path).ok()?;
    // CAST: st_dev and st_ino are the platform's widths; metadata gives u64.
    if inherited.st_dev as u64 != on_disk.dev() || inherited.st_ino as u64 != on_disk.ino() {
        tracing::debug!(fd, lock = %path.display(), "{HANDED_LOCK_VAR} names another file; ignored");
        return None;
    }
    // Locking an open file that already holds the lock succeeds and changes
    // nothing; one whose lock another open file holds is refused. (Not
    // through nix's Flock: its drop would unlock the parent's lock.)
    #[allow(deprecated)]
    match nix::fcntl::flock(fd, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(()) => Some(fd),
        Err(e) => {
            tracing::debug!(fd, lock = %path.display(), error = %e, "the handed-down descriptor does not hold the lock; ignored");
            None
        }
    }
}

/// Where card locks live: `$MACUDA_LOCK_DIR`, else `macuda-locks` in the
/// system temp directory.
pub fn default_lock_dir() -> PathBuf {
    lock_dir_from(std::env::var_os(LOCK_DIR_VAR))
}

fn lock_dir_from(var: Option<OsString>) -> PathBuf {
    match var {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::temp_dir().join("macuda-locks"),
    }
}

/// `card` with everything outside `[A-Za-z0-9._-]` replaced by `_`, plus
/// `.lock`. The result has no path separator, so it stays inside the
/// directory whatever the card's name.
fn lock_file_name(card: &str) -> String {
    let mut name: String = card
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.push_str(".lock");
    name
}

/// Whether a process with this pid exists now (signal 0 checks without
/// sending anything; EPERM means it exists but belongs to someone else).
fn process_exists(pid: u32) -> bool {
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    // Pid 0 and negative pids name process groups, not a process.
    match i32::try_from(pid) {
        Ok(raw) if raw > 0 => !matches!(kill(Pid::from_raw(raw), None), Err(Errno::ESRCH)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn own_pid() -> String {
        std::process::id().to_string()
    }

    #[test]
    fn a_second_acquire_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = CardLock::acquire(dir.path(), "card").unwrap();
        assert_eq!(first.took_over_from(), None);
        assert_eq!(
            fs::read_to_string(first.path()).unwrap(),
            format!("{}\n", own_pid())
        );
        match CardLock::acquire(dir.path(), "card") {
            Err(PciError::CardBusy { path, pid }) => {
                assert_eq!(path, dir.path().join("card.lock"));
                assert_eq!(pid, own_pid());
            }
            other => panic!("{other:?}"),
        }
        // The refused attempt did not disturb the holder's record.
        assert_eq!(
            fs::read_to_string(first.path()).unwrap(),
            format!("{}\n", own_pid())
        );
        let path = first.path().to_path_buf();
        drop(first);
        assert_eq!(fs::read_to_string(&path).unwrap(), "");
        let third = CardLock::acquire(dir.path(), "card").unwrap();
        // A cleanly released lock is not a takeover.
        assert_eq!(third.took_over_from(), None);
    }

    #[test]
    fn a_holder_that_has_not_written_its_pid_yet_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("card.lock")).unwrap();
        let _held = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        assert!(matches!(
            CardLock::acquire(dir.path(), "card"),
            Err(PciError::CardBusy { pid, .. }) if pid == "unknown"
        ));
    }

    #[test]
    fn a_dead_holders_lock_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        assert!(!process_exists(dead));
        fs::write(dir.path().join("card.lock"), format!("{dead}\n")).unwrap();
        let lock = CardLock::acquire(dir.path(), "card").unwrap();
        assert_eq!(lock.took_over_from(), Some(dead));
        assert_eq!(
            fs::read_to_string(lock.path()).unwrap(),
            format!("{}\n", own_pid())
        );
    }

    #[test]
    fn unreadable_leftovers_are_taken_over_silently() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("card.lock"), "not a pid at all\n").unwrap();
        let lock = CardLock::acquire(dir.path(), "card").unwrap();
        assert_eq!(lock.took_over_from(), None);
        assert_eq!(
            fs::read_to_string(lock.path()).unwrap(),
            format!("{}\n", own_pid())
        );
    }

    #[test]
    fn different_cards_do_not_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let a = CardLock::acquire(dir.path(), "sysfs:0000:01:00.0").unwrap();
        let b = CardLock::acquire(dir.path(), "sysfs:0000:02:00.0").unwrap();
        assert_ne!(a.path(), b.path());
    }

    #[test]
    fn names_are_sanitised_into_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let lock = CardLock::acquire(dir.path(), "sysfs:0000:01:00.0").unwrap();
        assert_eq!(lock.path(), dir.path().join("sysfs_0000_01_00.0.lock"));
        let sneaky = CardLock::acquire(dir.path(), "tinygpu:/tmp/../x y").unwrap();
        assert_eq!(sneaky.path(), dir.path().join("tinygpu__tmp_.._x_y.lock"));
        assert_eq!(lock_file_name("a-Z_9.é"), "a-Z_9._.lock");
    }

    #[test]
    fn creates_a_missing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a").join("b");
        let lock = CardLock::acquire(&nested, "null").unwrap();
        assert_eq!(lock.path(), nested.join("null.lock"));
    }

    #[test]
    fn the_lock_dir_comes_from_the_environment_or_the_temp_dir() {
        assert_eq!(
            lock_dir_from(Some("/run/macuda".into())),
            PathBuf::from("/run/macuda")
        );
        let fallback = std::env::temp_dir().join("macuda-locks");
        assert_eq!(lock_dir_from(None), fallback);
        assert_eq!(lock_dir_from(Some(OsString::new())), fallback);
    }

    #[test]
    fn a_handed_down_descriptor_is_adopted_only_for_its_own_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let held = CardLock::acquire(dir.path(), "card").unwrap();
        let handed = held.hand_down().unwrap();
        let (name, fd) = handed.env();
        assert_eq!(name, HANDED_LOCK_VAR);
        // Inheritable: no close-on-exec.
        let flags = fcntl(handed.file.as_raw_fd(), FcntlArg::F_GETFD).unwrap();
        assert!(!FdFlag::from_bits_truncate(flags).contains(FdFlag::FD_CLOEXEC));
        let path = held.path().to_path_buf();
        assert_eq!(
            handed_down(Some(fd.clone()), &path),
            handed.file.as_raw_fd().into()
        );
        // Not for another card's lock file, nor for junk.
        let other = CardLock::acquire(dir.path(), "other").unwrap();
        assert_eq!(handed_down(Some(fd.clone()), other.path()), None);
        for junk in ["", "x", "-1", "99999"] {
            assert_eq!(handed_down(Some(junk.into()), &path), None, "{junk:?}");
        }
        // A descriptor of the same file whose lock is another open file's
        // is refused.
        let stranger = File::open(&path).unwrap();
        assert_eq!(
            handed_down(Some(stranger.as_raw_fd().to_string()), &path),
            None
        );
        // The pid in the file stays the holder's, and a handed-down lock's
        // drop leaves it and the lock alone.
        let adopted = CardLock {
            hold: Hold::HandedDown(handed.file.as_raw_fd()),
            path: path.clone(),
            took_over_from: None,
        };
        assert!(adopted.is_handed_down());
        drop(adopted);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!("{}\n", own_pid())
        );
        assert!(matches!(
            CardLock::acquire(dir.path(), "card"),
            Err(PciError::CardBusy { .. })
        ));
        drop(handed);
        drop(held);
        CardLock::acquire(dir.path(), "card").unwrap();
    }

    #[test]
    fn this_process_exists() {
        assert!(process_exists(std::process::id()));
        assert!(!process_exists(0));
        assert!(!process_exists(u32::MAX));
    }
}
