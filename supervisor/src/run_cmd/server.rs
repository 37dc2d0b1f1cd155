//! The TinyGPU server a step's card is reached through: found answering,
//! or started when nothing answers, never replaced. Two servers on one
//! card, or a server restarted under a live client, wedge the card.

use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server we started has to answer.
pub const SERVER_START_PATIENCE: Duration = Duration::from_secs(10);

/// Where TinyGPU's app keeps its server on the Mac; started as
/// `<app> server <socket>`.
pub const TINYGPU_APP: &str = "/Applications/TinyGPU.app/Contents/MacOS/TinyGPU";

/// What the runner found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// A server answered on the socket; it was left alone.
    Live,
    /// Nothing answered; the runner started this server and it answers.
    Started { pid: u32, command: String },
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("nothing answers on {socket} and no server is known to start here (give --server CMD; on a Mac, TinyGPU's app starts it)")]
    NoServer { socket: PathBuf },
    #[error("starting the server `{command}`")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the server `{command}` (pid {pid}) did not answer on {socket} within {patience:?}")]
    NoAnswer {
        command: String,
        pid: u32,
        socket: PathBuf,
        patience: Duration,
    },
    #[error("the server `{command}` (pid {pid}) exited ({status}) before answering on {socket}")]
    Exited {
        command: String,
        pid: u32,
        status: std::process::ExitStatus,
        socket: PathBuf,
    },
}

/// Whether a server accepts connections on `socket` now.
pub fn answers(socket: &Path) -> bool {
    UnixStream::connect(socket).is_ok()
}

/// The server command to start when none is given: TinyGPU's app on a Mac
/// where it is installed, none elsewhere.
pub fn default_server(socket: &Path) -> Option<Vec<String>> {
    (cfg!(target_os = "macos") && Path::new(TINYGPU_APP).exists()).then(|| {
        vec![
            TINYGPU_APP.to_string(),
            "server".to_string(),
            socket.to_string_lossy().into_owned(),
        ]
    })
}

/// Leave a live server alone; otherwise start `command` (split on white
/// space; `{socket}` in it is replaced by the socket's path), else
/// `default` ([`default_server`]), detached from the runner, and wait until
/// it answers.
///
/// # Errors
/// No command to start, a command that cannot start, exits, or does not
/// answer in time (then it is killed).
pub fn ensure(
    socket: &Path,
    command: Option<&str>,
    default: Option<Vec<String>>,
    patience: Duration,
) -> Result<ServerState, ServerError> {
    if answers(socket) {
        return Ok(ServerState::Live);
    }
    let argv: Vec<String> = match command {
        Some(c) => {
            let path = socket.to_string_lossy();
            c.split_whitespace()
                .map(|w| w.replace("{socket}", &path))
                .collect()
        }
        None => default.ok_or_else(|| ServerError::NoServer {
            socket: socket.to_path_buf(),
        })?,
    };
    let shown = argv.join(" ");
    let Some((program, args)) = argv.split_first() else {
        return Err(ServerError::NoServer {
            socket: socket.to_path_buf(),
        });
    };
    // A socket file no server answers on is left by a server that died; a
    // new server could not bind over it.
    if socket.exists() {
        let _ = std::fs::remove_file(socket);
    }
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|source| ServerError::Spawn {
            command: shown.clone(),
            source,
        })?;
    let pid = child.id();
    let start = Instant::now();
    loop {
        if answers(socket) {
            // The server outlives the runner: the card stays served, warm,
            // for the next step. Its exit status is the OS's to collect.
            drop(child);
            return Ok(ServerState::Started {
                pid,
                command: shown,
            });
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(ServerError::Exited {
                command: shown,
                pid,
                status,
                socket: socket.to_path_buf(),
            });
        }
        if start.elapsed() > patience {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ServerError::NoAnswer {
                command: shown,
                pid,
                socket: socket.to_path_buf(),
                patience,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_live_server_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let _listener = UnixListener::bind(&socket).unwrap();
        let marker = dir.path().join("started");
        let cmd = format!("touch {}", marker.display());
        assert_eq!(
            ensure(&socket, Some(&cmd), None, Duration::from_secs(1)).unwrap(),
            ServerState::Live
        );
        assert!(!marker.exists());
    }

    #[test]
    fn no_server_and_no_command_is_an_error_naming_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let e = ensure(&socket, None, None, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, ServerError::NoServer { .. }));
        assert!(e.to_string().contains("s.sock"));
    }

    #[test]
    fn a_started_server_is_waited_for_and_outlives_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        // A stand-in server: python binds the socket after a moment.
        let script = dir.path().join("server.py");
        std::fs::write(
            &script,
            "import socket, sys, time\ntime.sleep(0.3)\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen()\ntime.sleep(3)\n",
        )
        .unwrap();
        let cmd = format!("python3 {} {{socket}}", script.display());
        match ensure(&socket, Some(&cmd), None, Duration::from_secs(10)).unwrap() {
            ServerState::Started { pid, command } => {
                assert!(command.ends_with(&*socket.to_string_lossy()));
                assert!(answers(&socket));
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_server_that_exits_or_never_answers_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let e = ensure(&socket, Some("false"), None, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, ServerError::Exited { .. }), "{e}");
        let e = ensure(&socket, Some("sleep 5"), None, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, ServerError::NoAnswer { .. }), "{e}");
        let e = ensure(
            &socket,
            Some("/no/such/server"),
            None,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(e, ServerError::Spawn { .. }), "{e}");
    }
}
