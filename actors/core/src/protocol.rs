//! [`actor_protocol!`]: an actor's requests, service trait and handle,
//! declared once.

use std::fmt::{self, Debug, Write};

const SUMMARY_LIMIT: usize = 96;

struct Bounded {
    out: String,
    truncated: bool,
}

impl Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = SUMMARY_LIMIT.saturating_sub(self.out.len());
        if s.len() <= room {
            self.out.push_str(s);
            Ok(())
        } else {
            let mut cut = room;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            self.out.push_str(&s[..cut]);
            self.truncated = true;
            // Stop the formatter: large arguments are never rendered whole.
            Err(fmt::Error)
        }
    }
}

/// `Debug` of an argument, cut short so that byte buffers do not bloat
/// crash reports or cost time to format.
#[doc(hidden)]
pub fn short_debug<T: Debug + ?Sized>(value: &T) -> String {
    let mut b = Bounded {
        out: String::new(),
        truncated: false,
    };
    let _ = write!(b, "{value:?}");
    if b.truncated {
        b.out.push('…');
    }
    b.out
}

/// Declares an actor protocol: each line `Variant => fn method(args) -> T;`
/// becomes a request variant carrying a `Reply<Result<T, Error>>`, a method
/// of the service trait the actor implements, and a blocking method of the
/// handle. The request kind used by fault plans and reports is the method
/// name.
///
/// ```
/// use macuda_core::{actor_protocol, ActorError, ActorFault, Severity};
///
/// #[derive(Debug, thiserror::Error)]
/// pub enum CountError {
///     #[error(transparent)]
///     Actor(#[from] ActorError),
/// }
/// impl ActorFault for CountError {
///     fn severity(&self) -> Severity { Severity::Recoverable }
/// }
///
/// actor_protocol! {
///     pub handle CountHandle;
///     request CountRequest;
///     service CountService;
///     error CountError;
///     Add => fn add(n: u64) -> u64;
/// }
/// ```
#[macro_export]
macro_rules! actor_protocol {
    (
        $(#[$hmeta:meta])*
        $vis:vis handle $handle:ident;
        request $req:ident;
        service $service:ident;
        error $err:ty;
        $(
            $(#[$vmeta:meta])*
            $variant:ident => fn $method:ident ( $( $arg:ident : $argty:ty ),* $(,)? ) -> $ret:ty;
        )+
    ) => {
        /// One variant per service method; each carries its reply sender.
        $vis enum $req {
            $(
                $variant {
                    $( $arg: $argty, )*
                    reply: $crate::Reply<::std::result::Result<$ret, $err>>,
                },
            )+
        }

        impl $req {
            /// Every request's name, as [`kind`](Self::kind) gives it (what
            /// a fault plan's request filter must name).
            pub const KINDS: &'static [&'static str] = &[ $( stringify!($method), )+ ];
        }

        impl $crate::__private::Request for $req {
            type Error = $err;

            fn kind(&self) -> &'static str {
                match self {
                    $( $req::$variant { .. } => stringify!($method), )+
                }
            }

            fn describe(&self) -> String {
                match self {
                    $(
                        #[allow(unused_variables)]
                        $req::$variant { $( $arg, )* .. } => {
                            #[allow(unused_mut)]
                            let mut parts: Vec<String> = Vec::new();
                            $(
                                parts.push(format!(
                                    "{}={}",
                                    stringify!($arg),
                                    $crate::__private::short_debug($arg)
                                ));
                            )*
                            format!("{}({})", stringify!($method), parts.join(", "))
                        }
                    )+
                }
            }

            fn reject(self, err: $err) {
                match self {
                    $( $req::$variant { reply, .. } => reply.send(Err(err)), )+
                }
            }
        }

        impl $req {
            /// Run this request against `service` and answer it.
            pub fn dispatch<S: $service + ?Sized>(self, service: &mut S, cx: &mut $crate::Cx) {
                match self {
                    $(
                        $req::$variant { $( $arg, )* reply } => {
                            let result = service.$method($( $arg ),*);
                            cx.finish(&result);
                            reply.send(result);
                        }
                    )+
                }
            }
        }

        /// What the actor implements: one method per request.
        $vis trait $service: Send {
            $(
                $(#[$vmeta])*
                fn $method(&mut self, $( $arg: $argty ),*) -> ::std::result::Result<$ret, $err>;
            )+
        }

        $(#[$hmeta])*
        #[derive(Clone)]
        $vis struct $handle {
            inner: $crate::Handle<$req>,
        }

        impl $handle {
            pub fn new(inner: $crate::Handle<$req>) -> Self {
                Self { inner }
            }

            pub fn actor(&self) -> &'static str {
                self.inner.actor()
            }

            /// Start an actor thread serving `service` under the harness.
            ///
            /// # Errors
            /// Only if the OS refuses to create the thread.
            pub fn spawn<S: $service + 'static>(
                config: $crate::ActorConfig,
                mut service: S,
            ) -> ::std::io::Result<($handle, $crate::ActorJoin)> {
                let (inner, join) =
                    $crate::spawn(config, move |req: $req, cx| req.dispatch(&mut service, cx))?;
                Ok(($handle { inner }, join))
            }

            $(
                $(#[$vmeta])*
                pub fn $method(&self, $( $arg: $argty ),*) -> ::std::result::Result<$ret, $err> {
                    self.inner.call(stringify!($method), |reply| $req::$variant { $( $arg, )* reply })
                }
            )+
        }
    };
}

#[cfg(test)]
mod tests {
    use super::short_debug;

    #[test]
    fn long_arguments_are_cut() {
        let v = vec![0u8; 10_000];
        let s = short_debug(&v);
        assert!(s.len() <= super::SUMMARY_LIMIT + '…'.len_utf8());
        assert!(s.ends_with('…'));
        assert_eq!(short_debug(&42u32), "42");
    }
}
