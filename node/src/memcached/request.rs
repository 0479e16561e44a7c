//! Parsing one request line of the memcached text protocol: pure, no I/O, no counting.

use crate::limits::{KEY_BYTES_MAX, LimitExceeded, VALUE_BYTES_MAX};

use super::{KEYS_PER_GET_MAX, LINE_BYTES_MAX};

/// One parsed request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get` (`cas == false`) or `gets` (`cas == true`), with 1 to [`KEYS_PER_GET_MAX`] keys, each
    /// at most [`KEY_BYTES_MAX`] bytes, in request order (repeats kept, as memcached does).
    Get {
        keys: Vec<&'a [u8]>,
        cas: bool,
    },
    Version,
    Stats,
    Quit,
    /// A write command, refused. `data_bytes` is the length of the data block that follows the
    /// line (storage commands only); it has been checked against `VALUE_BYTES_MAX`.
    Write {
        command: &'static str,
        data_bytes: Option<usize>,
    },
}

/// Why a request was refused. The reply is [`RequestError::reply`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("empty request line")]
    EmptyLine,
    #[error("control byte 0x{byte:02x} at offset {offset} of the request line")]
    ControlByte { byte: u8, offset: usize },
    /// The command word has a non-ASCII byte: binary garbage, or the binary protocol.
    #[error("byte 0x{byte:02x} at offset {offset} in the command word; only the text protocol is served")]
    NotText { byte: u8, offset: usize },
    /// Answered `ERROR`, as memcached answers an unknown command.
    #[error("unknown command")]
    UnknownCommand,
    #[error("{command} needs at least one key")]
    MissingKey { command: &'static str },
    /// `position` counts keys from 1.
    #[error("key {position}: {limit}")]
    KeyTooLong { position: usize, limit: LimitExceeded },
    #[error("{count} keys in one request but the limit KEYS_PER_GET_MAX is {KEYS_PER_GET_MAX}; split the request")]
    TooManyKeys { count: usize },
    #[error("{command} takes no arguments here")]
    UnexpectedArgument { command: &'static str },
    /// Closes the connection: the data block that follows cannot be skipped.
    #[error("bad command line format: {command} needs a decimal data length; closing the connection")]
    BadDataLength { command: &'static str },
    /// Closes the connection: the data block is too large to skip.
    #[error("{0}; closing the connection")]
    ValueTooLarge(LimitExceeded),
    /// Closes the connection: the next line boundary cannot be found with bounded reading.
    #[error("line too long: no line end within LINE_BYTES_MAX ({LINE_BYTES_MAX}) bytes; closing the connection")]
    LineTooLong,
    /// The connection ended in the middle of a line.
    #[error("truncated request: the connection ended before the line end")]
    Truncated,
    /// A write's data block was not followed by a line end; the rest of that line is discarded.
    #[error("bad data chunk: the data block is not followed by a line end")]
    BadDataChunk,
}

impl RequestError {
    /// The reply line for this error, with its `\r\n`.
    pub fn reply(&self) -> String {
        match self {
            RequestError::UnknownCommand => "ERROR\r\n".to_string(),
            other => format!("CLIENT_ERROR {other}\r\n"),
        }
    }

    /// True when the connection is closed after the reply.
    pub fn closes_connection(&self) -> bool {
        matches!(
            self,
            RequestError::BadDataLength { .. }
                | RequestError::ValueTooLarge(_)
                | RequestError::LineTooLong
                | RequestError::Truncated
        )
    }
}

/// Write commands, each with the position of its data-length token if a data block follows.
const WRITE_COMMANDS: &[(&str, Option<usize>)] = &[
    ("set", Some(4)),
    ("add", Some(4)),
    ("replace", Some(4)),
    ("append", Some(4)),
    ("prepend", Some(4)),
    ("cas", Some(4)),
    ("ms", Some(2)),
    ("delete", None),
    ("incr", None),
    ("decr", None),
    ("touch", None),
    ("gat", None),
    ("gats", None),
    ("md", None),
    ("ma", None),
    ("flush_all", None),
    ("verbosity", None),
    ("cache_memlimit", None),
    ("shutdown", None),
    ("slabs", None),
    ("lru", None),
    ("lru_crawler", None),
];

/// Parses one request line, without its line end. Pure: no I/O, no counting.
///
/// Tokens are separated by spaces (runs of spaces are one separator, as in memcached). Keys are
/// bytes: any byte but space and the ASCII controls, the same rule the store applies to the keys it
/// accepts ([`crate::entry::validate_key`]), so every stored key, UTF-8 or not, can be asked for.
/// The command word must be ASCII; anything else is binary garbage (or the binary protocol,
/// whose requests start with the byte 0x80) and is refused as such, not as an unknown command.
pub fn parse_request(line: &[u8]) -> Result<Request<'_>, RequestError> {
    // The first problem in the line is reported: a binary-protocol request starts with 0x80.
    let command_start = line.iter().position(|&b| b != b' ').unwrap_or(line.len());
    let command_end = line[command_start..].iter().position(|&b| b == b' ').map_or(line.len(), |n| command_start + n);
    let non_ascii = line[command_start..command_end].iter().position(|b| !b.is_ascii()).map(|n| command_start + n);
    let control = line.iter().position(|&b| b.is_ascii_control());
    match (non_ascii, control) {
        (Some(offset), control) if control.is_none_or(|c| offset < c) => {
            return Err(RequestError::NotText { byte: line[offset], offset });
        }
        (_, Some(offset)) => return Err(RequestError::ControlByte { byte: line[offset], offset }),
        _ => {}
    }
    let mut tokens = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
    let command = tokens.next().ok_or(RequestError::EmptyLine)?;
    match command {
        b"get" | b"gets" => {
            let name = if command == b"get" { "get" } else { "gets" };
            // One pass: the keys are collected while counted, and the count of an over-long list
            // is finished without collecting the rest.
            let mut keys: Vec<&[u8]> = Vec::new();
            let mut too_long = None;
            while let Some(key) = tokens.next() {
                if keys.len() == KEYS_PER_GET_MAX {
                    return Err(RequestError::TooManyKeys { count: KEYS_PER_GET_MAX + 1 + tokens.count() });
                }
                if key.len() > KEY_BYTES_MAX && too_long.is_none() {
                    too_long = Some((keys.len() + 1, key.len()));
                }
                keys.push(key);
            }
            if keys.is_empty() {
                return Err(RequestError::MissingKey { command: name });
            }
            if let Some((position, actual)) = too_long {
                let limit = LimitExceeded { limit: "KEY_BYTES_MAX", max: KEY_BYTES_MAX, actual };
                return Err(RequestError::KeyTooLong { position, limit });
            }
            Ok(Request::Get { keys, cas: name == "gets" })
        }
        b"version" | b"stats" | b"quit" => {
            let (name, request) = match command {
                b"version" => ("version", Request::Version),
                b"stats" => ("stats", Request::Stats),
                _ => ("quit", Request::Quit),
            };
            if tokens.next().is_some() {
                return Err(RequestError::UnexpectedArgument { command: name });
            }
            Ok(request)
        }
        _ => {
            let Some(&(name, length_at)) = WRITE_COMMANDS.iter().find(|(name, _)| name.as_bytes() == command) else {
                return Err(RequestError::UnknownCommand);
            };
            let data_bytes = match length_at {
                None => None,
                Some(at) => {
                    let token = tokens.nth(at - 1).ok_or(RequestError::BadDataLength { command: name })?;
                    Some(parse_data_length(token).ok_or(RequestError::BadDataLength { command: name })?)
                }
            };
            if let Some(actual) = data_bytes
                && actual > VALUE_BYTES_MAX
            {
                return Err(RequestError::ValueTooLarge(LimitExceeded {
                    limit: "VALUE_BYTES_MAX",
                    max: VALUE_BYTES_MAX,
                    actual,
                }));
            }
            Ok(Request::Write { command: name, data_bytes })
        }
    }
}

/// A data length: decimal digits only (no sign), as memcached's `safe_strtol` effectively
/// requires. Saturates rather than overflowing, since anything that large is over the limit.
fn parse_data_length(token: &[u8]) -> Option<usize> {
    if token.is_empty() || !token.iter().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(token.iter().fold(0usize, |n, b| n.saturating_mul(10).saturating_add(usize::from(b - b'0'))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_reads() {
        assert_eq!(parse_request(b"get a"), Ok(Request::Get { keys: vec![b"a"], cas: false }));
        assert_eq!(parse_request(b"gets a  b a "), Ok(Request::Get { keys: vec![b"a", b"b", b"a"], cas: true }));
        // Keys are bytes, as the store's keys are: UTF-8 or not.
        let keys: Vec<&[u8]> = vec!["caf\u{e9}".as_bytes(), b"\xff\x80"];
        assert_eq!(parse_request("get caf\u{e9} \u{ff}".as_bytes()).map(|_| ()), Ok(()));
        assert_eq!(parse_request(b"get caf\xc3\xa9 \xff\x80"), Ok(Request::Get { keys, cas: false }));
        assert_eq!(parse_request(b"  version"), Ok(Request::Version));
        assert_eq!(parse_request(b"stats"), Ok(Request::Stats));
        assert_eq!(parse_request(b"quit"), Ok(Request::Quit));
    }

    #[test]
    fn refuses_malformed_reads() {
        assert_eq!(parse_request(b""), Err(RequestError::EmptyLine));
        assert_eq!(parse_request(b"   "), Err(RequestError::EmptyLine));
        assert_eq!(parse_request(b"get"), Err(RequestError::MissingKey { command: "get" }));
        assert_eq!(parse_request(b"gets  "), Err(RequestError::MissingKey { command: "gets" }));
        assert_eq!(parse_request(b"GET a"), Err(RequestError::UnknownCommand));
        assert_eq!(parse_request(b"mg a v"), Err(RequestError::UnknownCommand));
        assert_eq!(parse_request(b"stats items"), Err(RequestError::UnexpectedArgument { command: "stats" }));
        assert_eq!(parse_request(b"get a\0b"), Err(RequestError::ControlByte { byte: 0, offset: 5 }));
        assert_eq!(parse_request(b"get a\tb"), Err(RequestError::ControlByte { byte: 9, offset: 5 }));
        assert_eq!(parse_request(b"get a\r"), Err(RequestError::ControlByte { byte: 13, offset: 5 }));
        assert_eq!(parse_request(b"  \x80\x00"), Err(RequestError::NotText { byte: 0x80, offset: 2 }));
        assert_eq!(parse_request(b"g\x00\x80"), Err(RequestError::ControlByte { byte: 0, offset: 1 }));
        assert_eq!(parse_request(b"get \x00\x80"), Err(RequestError::ControlByte { byte: 0, offset: 4 }));
        assert_eq!(parse_request(b"\x80"), Err(RequestError::NotText { byte: 0x80, offset: 0 }));
        assert_eq!(parse_request(b"  g\xffet a"), Err(RequestError::NotText { byte: 0xff, offset: 3 }));
        assert_eq!(parse_request("g\u{e9}t a".as_bytes()), Err(RequestError::NotText { byte: 0xc3, offset: 1 }));
    }

    #[test]
    fn key_and_key_count_limits() {
        let key = "k".repeat(KEY_BYTES_MAX);
        assert!(parse_request(format!("get {key}").as_bytes()).is_ok());
        let long = format!("get a {key}k");
        let err = parse_request(long.as_bytes()).unwrap_err();
        assert!(matches!(err, RequestError::KeyTooLong { position: 2, ref limit } if limit.actual == 251), "{err:?}");
        assert!(err.reply().contains("KEY_BYTES_MAX"));

        let keys = |n: usize| format!("get{}", " k".repeat(n));
        assert!(parse_request(keys(KEYS_PER_GET_MAX).as_bytes()).is_ok());
        assert_eq!(
            parse_request(keys(KEYS_PER_GET_MAX + 1).as_bytes()),
            Err(RequestError::TooManyKeys { count: KEYS_PER_GET_MAX + 1 })
        );
        let widest = format!("gets{}", format!(" {key}").repeat(KEYS_PER_GET_MAX));
        assert!(widest.len() <= LINE_BYTES_MAX);
        assert!(parse_request(widest.as_bytes()).is_ok());
    }

    #[test]
    fn parses_writes_and_their_data_length() {
        assert_eq!(parse_request(b"set k 0 0 5"), Ok(Request::Write { command: "set", data_bytes: Some(5) }));
        assert_eq!(
            parse_request(b"cas k 0 0 5 99 noreply"),
            Ok(Request::Write { command: "cas", data_bytes: Some(5) })
        );
        assert_eq!(parse_request(b"ms k 3 T0"), Ok(Request::Write { command: "ms", data_bytes: Some(3) }));
        assert_eq!(parse_request(b"delete k"), Ok(Request::Write { command: "delete", data_bytes: None }));
        assert_eq!(parse_request(b"flush_all"), Ok(Request::Write { command: "flush_all", data_bytes: None }));
        assert_eq!(parse_request(b"gat 0 k"), Ok(Request::Write { command: "gat", data_bytes: None }));
        for bad in ["set k 0 0", "set k 0 0 -1", "set k 0 0 +5", "set k 0 0 5x", "set"] {
            assert_eq!(parse_request(bad.as_bytes()), Err(RequestError::BadDataLength { command: "set" }), "{bad}");
        }
        let huge = format!("append k 0 0 {}", VALUE_BYTES_MAX + 1);
        let err = parse_request(huge.as_bytes()).unwrap_err();
        assert!(matches!(err, RequestError::ValueTooLarge(_)) && err.closes_connection());
        let overflow = parse_request(b"set k 0 0 99999999999999999999999999").unwrap_err();
        assert!(matches!(overflow, RequestError::ValueTooLarge(_)));
        assert_eq!(parse_request(format!("set k 0 0 {VALUE_BYTES_MAX}").as_bytes()).map(|_| ()), Ok(()));
    }

    #[test]
    fn error_replies_are_one_line() {
        assert_eq!(RequestError::UnknownCommand.reply(), "ERROR\r\n");
        assert!(RequestError::LineTooLong.reply().starts_with("CLIENT_ERROR line too long"));
        let errors = [
            RequestError::EmptyLine,
            RequestError::ControlByte { byte: 0, offset: 0 },
            RequestError::NotText { byte: 0x80, offset: 0 },
            RequestError::MissingKey { command: "get" },
            RequestError::TooManyKeys { count: 999 },
            RequestError::BadDataLength { command: "set" },
            RequestError::LineTooLong,
            RequestError::Truncated,
            RequestError::BadDataChunk,
        ];
        for e in errors {
            let reply = e.reply();
            assert!(reply.starts_with("CLIENT_ERROR ") && reply.ends_with("\r\n"), "{reply:?}");
            assert_eq!(reply.matches('\n').count(), 1, "{reply:?}");
        }
    }
}
