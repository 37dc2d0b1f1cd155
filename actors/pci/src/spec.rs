//! Device selection: the one word shared by `MACUDA_DEVICE` and `--device`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// Pick the best device present (see [`DeviceSpec::resolve`]).
    Auto,
    Null,
    TinyGpu {
        socket: Option<PathBuf>,
    },
    Remote {
        host: String,
        port: u16,
    },
    Sysfs {
        bdf: String,
    },
    Kernel {
        index: u32,
    },
    Replay {
        trace: PathBuf,
    },
    /// A simulated card (`macuda_sim`) served in this process over the
    /// TinyGPU protocol; `chip` names it (gb202 when absent).
    Sim {
        chip: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad device `{input}`: {why} (expected null, auto, tinygpu[:SOCKET], remote:HOST:PORT, sysfs:BDF, kernel[:N], replay:TRACE or sim[:CHIP])")]
pub struct ParseDeviceError {
    pub input: String,
    pub why: &'static str,
}

impl FromStr for DeviceSpec {
    type Err = ParseDeviceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why| ParseDeviceError {
            input: s.to_string(),
            why,
        };
        let (word, rest) = match s.split_once(':') {
            Some((w, r)) => (w, Some(r)),
            None => (s, None),
        };
        match (word, rest) {
            ("auto", None) | ("", None) => Ok(DeviceSpec::Auto),
            ("null", None) => Ok(DeviceSpec::Null),
            ("tinygpu", None) => Ok(DeviceSpec::TinyGpu { socket: None }),
            ("tinygpu", Some(p)) if !p.is_empty() => Ok(DeviceSpec::TinyGpu {
                socket: Some(PathBuf::from(p)),
            }),
            ("remote", Some(hp)) => {
                let (host, port) = hp
                    .rsplit_once(':')
                    .ok_or_else(|| bad("remote needs HOST:PORT"))?;
                if host.is_empty() {
                    return Err(bad("remote needs a host"));
                }
                let port = port
                    .parse()
                    .map_err(|_| bad("port is not a number from 0 to 65535"))?;
                Ok(DeviceSpec::Remote {
                    host: host.to_string(),
                    port,
                })
            }
            ("sysfs", Some(bdf)) if !bdf.is_empty() => Ok(DeviceSpec::Sysfs {
                bdf: bdf.to_string(),
            }),
            ("kernel", None) => Ok(DeviceSpec::Kernel { index: 0 }),
            ("kernel", Some(n)) => Ok(DeviceSpec::Kernel {
                index: n.parse().map_err(|_| bad("kernel index is not a number"))?,
            }),
            ("replay", Some(p)) if !p.is_empty() => Ok(DeviceSpec::Replay {
                trace: PathBuf::from(p),
            }),
            ("sim", None) => Ok(DeviceSpec::Sim { chip: None }),
            ("sim", Some(c)) if !c.is_empty() => Ok(DeviceSpec::Sim {
                chip: Some(c.to_string()),
            }),
            _ => Err(bad("unknown or incomplete device")),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Null => f.write_str("null"),
            DeviceSpec::TinyGpu { socket: None } => f.write_str("tinygpu"),
            DeviceSpec::TinyGpu { socket: Some(p) } => write!(f, "tinygpu:{}", p.display()),
            DeviceSpec::Remote { host, port } => write!(f, "remote:{host}:{port}"),
            DeviceSpec::Sysfs { bdf } => write!(f, "sysfs:{bdf}"),
            DeviceSpec::Kernel { index } => write!(f, "kernel:{index}"),
            DeviceSpec::Replay { trace } => write!(f, "replay:{}", trace.display()),
            DeviceSpec::Sim { chip: None } => f.write_str("sim"),
            DeviceSpec::Sim { chip: Some(c) } => write!(f, "sim:{c}"),
        }
    }
}

/// Which backends this build can open; `auto` only picks among these.
fn built(spec: &DeviceSpec) -> bool {
    matches!(
        spec,
        DeviceSpec::Null
            | DeviceSpec::TinyGpu { .. }
            | DeviceSpec::Remote { .. }
            | DeviceSpec::Sysfs { .. }
            | DeviceSpec::Kernel { .. }
    )
}

/// Whether a TinyGPU server answers on its default socket.
fn tinygpu_answers() -> bool {
    std::os::unix::net::UnixStream::connect(default_tinygpu_socket()).is_ok()
}

impl DeviceSpec {
    /// Resolve `auto`: the kernel module when /dev/nvidiactl exists, TinyGPU
    /// on macOS, else null; a candidate whose backend is not built yet is
    /// passed over with a note saying so. Other specs come back unchanged.
    pub fn resolve(self) -> (DeviceSpec, Vec<String>) {
        if self != DeviceSpec::Auto {
            return (self, Vec::new());
        }
        let mut notes = Vec::new();
        let mut candidates = Vec::new();
        if std::path::Path::new("/dev/nvidiactl").exists() {
            candidates.push(DeviceSpec::Kernel { index: 0 });
        }
        if cfg!(target_os = "macos") && tinygpu_answers() {
            candidates.push(DeviceSpec::TinyGpu { socket: None });
        }
        for c in candidates {
            if built(&c) {
                return (c, notes);
            }
            notes.push(format!(
                "auto: `{c}` is present but its backend is not built yet; passed over"
            ));
        }
        (DeviceSpec::Null, notes)
    }
}

/// Where TinyGPU's app listens unless told otherwise (tinygrad's default:
/// `tinygpu.sock` in the temp directory).
pub fn default_tinygpu_socket() -> PathBuf {
    std::env::temp_dir().join("tinygpu.sock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!("null".parse(), Ok(DeviceSpec::Null));
        assert_eq!("auto".parse(), Ok(DeviceSpec::Auto));
        assert_eq!("tinygpu".parse(), Ok(DeviceSpec::TinyGpu { socket: None }));
        assert_eq!(
            "tinygpu:/tmp/s.sock".parse(),
            Ok(DeviceSpec::TinyGpu {
                socket: Some("/tmp/s.sock".into())
            })
        );
        assert_eq!(
            "remote:10.0.0.2:6667".parse(),
            Ok(DeviceSpec::Remote {
                host: "10.0.0.2".into(),
                port: 6667
            })
        );
        assert_eq!(
            "sysfs:0000:01:00.0".parse(),
            Ok(DeviceSpec::Sysfs {
                bdf: "0000:01:00.0".into()
            })
        );
        assert_eq!("kernel".parse(), Ok(DeviceSpec::Kernel { index: 0 }));
        assert_eq!("kernel:3".parse(), Ok(DeviceSpec::Kernel { index: 3 }));
        assert_eq!(
            "replay:boot.trace".parse(),
            Ok(DeviceSpec::Replay {
                trace: "boot.trace".into()
            })
        );
        assert_eq!("sim".parse(), Ok(DeviceSpec::Sim { chip: None }));
        assert_eq!(
            "sim:gh100".parse(),
            Ok(DeviceSpec::Sim {
                chip: Some("gh100".into())
            })
        );
        assert!("sim:".parse::<DeviceSpec>().is_err());
        for s in ["sim", "sim:gh100"] {
            assert_eq!(s.parse::<DeviceSpec>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn rejects_nonsense() {
        for bad in [
            "gpu",
            "remote:host",
            "remote::1",
            "remote:h:99999",
            "kernel:x",
            "sysfs:",
            "null:1",
        ] {
            assert!(bad.parse::<DeviceSpec>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn round_trips_through_display() {
        for s in [
            "null",
            "auto",
            "tinygpu",
            "remote:h:1",
            "sysfs:0000:01:00.0",
            "kernel:2",
            "replay:t",
        ] {
            let spec: DeviceSpec = s.parse().unwrap();
            assert_eq!(spec.to_string().parse::<DeviceSpec>().unwrap(), spec);
        }
    }

    #[test]
    fn explicit_specs_resolve_to_themselves() {
        let (spec, notes) = DeviceSpec::Null.resolve();
        assert_eq!(spec, DeviceSpec::Null);
        assert!(notes.is_empty());
    }
}
