//! A strict reader of memcached text-protocol replies, written from the protocol, not from the
//! node: every line must end in `\r\n`, every token be where the protocol puts it, every data
//! block be exactly as long as its header says and end in `\r\n`. What does not parse is a
//! [`Breach::Contract`]; a connection that ends, breaks or times out is [`Breach::Lost`], which
//! says nothing about the node.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// Longest reply line the census accepts, line end included: a `VALUE` header with a 250-byte
/// key and every number at its widest is under 300 bytes; `stats` lines are short.
const LINE_BYTES_MAX: usize = 8 << 10;

/// Why a reply could not be judged a correct one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breach {
    /// The connection ended, broke or timed out: nothing to judge.
    Lost,
    /// The bytes that came back are not a reply a correct node may give; in words.
    Contract(String),
}

pub type Judged<T> = Result<T, Breach>;

/// A contract breach in words.
pub fn breach<T>(what: impl Into<String>) -> Judged<T> {
    Err(Breach::Contract(what.into()))
}

/// One `VALUE <key> <flags> <bytes> [<cas unique>]` item of a get reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub key: Vec<u8>,
    pub cas: Option<u64>,
    pub data: Vec<u8>,
}

/// What one line of a reply is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// `END`
    End,
    /// `ERROR`, `CLIENT_ERROR <text>` or `SERVER_ERROR <text>`: the whole line.
    Error(String),
    /// Anything else, without its `\r\n`.
    Other(Vec<u8>),
}

/// The reply side of one connection.
#[derive(Debug)]
pub struct Wire<'a, R> {
    pub conn: &'a mut R,
}

impl<R: AsyncBufRead + Unpin> Wire<'_, R> {
    /// The next line, without its `\r\n`.
    pub async fn line(&mut self) -> Judged<Vec<u8>> {
        let mut line = Vec::new();
        let read = (&mut *self.conn).take(LINE_BYTES_MAX as u64).read_until(b'\n', &mut line).await;
        match read {
            Err(_) | Ok(0) => Err(Breach::Lost),
            Ok(_) if !line.ends_with(b"\n") && line.len() >= LINE_BYTES_MAX => {
                breach(format!("a reply line of over {LINE_BYTES_MAX} bytes: {}", shown(&line)))
            }
            // Ended mid-line: the connection went.
            Ok(_) if !line.ends_with(b"\n") => Err(Breach::Lost),
            Ok(_) if !line.ends_with(b"\r\n") => breach(format!("a reply line ended by a bare \\n: {}", shown(&line))),
            Ok(_) => {
                line.truncate(line.len() - 2);
                Ok(line)
            }
        }
    }

    /// The next line, classified.
    pub async fn classified(&mut self) -> Judged<Line> {
        let line = self.line().await?;
        Ok(classify(line))
    }

    /// The data block of an item whose header said `bytes`, and its `\r\n`.
    pub async fn data(&mut self, bytes: usize) -> Judged<Vec<u8>> {
        let mut data = vec![0; bytes + 2];
        self.conn.read_exact(&mut data).await.map_err(|_| Breach::Lost)?;
        if !data.ends_with(b"\r\n") {
            return breach(format!(
                "a {bytes}-byte data block not followed by \\r\\n (then {})",
                shown(&data[bytes..])
            ));
        }
        data.truncate(bytes);
        Ok(data)
    }

    /// A get's reply to `keys` (`cas`: a `gets`): its items, in order, until `END`; or the one
    /// error line a node may answer a whole get with. Each item names a key asked for, after
    /// the one before it in the request (the protocol answers in request order), carries a cas
    /// unique exactly when asked, and has a data block of its stated length.
    pub async fn get_reply(&mut self, keys: &[Vec<u8>], cas: bool) -> Judged<Result<Vec<Item>, String>> {
        let mut items: Vec<Item> = Vec::new();
        let mut next_position = 0;
        loop {
            let line = match self.classified().await? {
                Line::End => return Ok(Ok(items)),
                Line::Error(error) if items.is_empty() => return Ok(Err(error)),
                Line::Error(error) => return breach(format!("{error:?} after {} VALUE items", items.len())),
                Line::Other(line) => line,
            };
            let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            let expected = if cas { 5 } else { 4 };
            if fields.first() != Some(&&b"VALUE"[..]) || fields.len() != expected {
                return breach(format!(
                    "expected `VALUE <key> <flags> <bytes>{}` or END, got {}",
                    if cas { " <cas unique>" } else { "" },
                    shown(&line)
                ));
            }
            let key = fields[1];
            let Some(position) = keys[next_position..].iter().position(|k| k == key).map(|p| p + next_position) else {
                return breach(format!("an item for {}, not a key asked for after the last one answered", shown(key)));
            };
            next_position = position + 1;
            if decimal(fields[2]).is_none_or(|flags| flags > u64::from(u32::MAX)) {
                return breach(format!("flags {} are not a 32-bit decimal", shown(fields[2])));
            }
            let Some(bytes) = decimal(fields[3]).and_then(|b| usize::try_from(b).ok()) else {
                return breach(format!("length {} is not a decimal", shown(fields[3])));
            };
            if bytes > qs_node::limits::VALUE_BYTES_MAX {
                return breach(format!("a {bytes}-byte value, over VALUE_BYTES_MAX"));
            }
            let cas = match fields.get(4) {
                Some(token) => Some(
                    decimal(token)
                        .ok_or_else(|| Breach::Contract(format!("cas unique {} is not a decimal", shown(token))))?,
                ),
                None => None,
            };
            let data = self.data(bytes).await?;
            items.push(Item { key: key.to_vec(), cas, data });
        }
    }

    /// The `VERSION <text>` line every census request is followed by: the stream is in step.
    pub async fn in_step(&mut self, after: &str) -> Judged<()> {
        let line = self.line().await?;
        match line.strip_prefix(b"VERSION ") {
            Some(version) if !version.is_empty() => Ok(()),
            _ => breach(format!(
                "after {after}, the reply to the `version` that followed it was {}: the stream is out of step",
                shown(&line)
            )),
        }
    }
}

/// `line` classified.
pub fn classify(line: Vec<u8>) -> Line {
    if line == b"END" {
        return Line::End;
    }
    let is_error = line == b"ERROR" || line.starts_with(b"CLIENT_ERROR ") || line.starts_with(b"SERVER_ERROR ");
    if is_error { Line::Error(String::from_utf8_lossy(&line).into_owned()) } else { Line::Other(line) }
}

/// `token` as an unsigned decimal: digits only.
pub fn decimal(token: &[u8]) -> Option<u64> {
    if token.is_empty() || !token.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// Bytes as a message shows them: escaped, and cut after 80.
pub fn shown(bytes: &[u8]) -> String {
    let mut out: String = bytes.iter().take(80).flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect();
    if bytes.len() > 80 {
        out.push_str(&format!("... ({} bytes)", bytes.len()));
    }
    format!("\"{out}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `future`'s output; it must not wait (it reads from a byte slice).
    fn now<T>(future: impl std::future::Future<Output = T>) -> T {
        let mut future = std::pin::pin!(future);
        match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => panic!("a read from a byte slice waited"),
        }
    }

    fn get(reply: &[u8], keys: &[&[u8]], cas: bool) -> Judged<Result<Vec<Item>, String>> {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let mut conn = reply;
        now(Wire { conn: &mut conn }.get_reply(&keys, cas))
    }

    #[test]
    fn a_get_reply_is_read_item_by_item() {
        let reply = b"VALUE a 0 0 7\r\n\r\nVALUE c 5 3 7\r\nx\ry\r\nEND\r\n";
        let items = get(reply, &[b"a", b"b", b"c"], true).expect("judged").expect("items");
        assert_eq!(items.len(), 2);
        assert_eq!((items[0].key.as_slice(), items[0].data.as_slice(), items[0].cas), (&b"a"[..], &b""[..], Some(7)));
        assert_eq!(items[1].data, b"x\ry");
        assert_eq!(get(b"SERVER_ERROR disk\r\n", &[b"a"], false), Ok(Err("SERVER_ERROR disk".into())));
    }

    #[test]
    fn a_reply_out_of_the_protocol_is_a_breach() {
        let breached =
            |reply: &[u8], keys: &[&[u8]], cas: bool| matches!(get(reply, keys, cas), Err(Breach::Contract(_)));
        // An empty value whose data block lost its line end.
        assert!(breached(b"VALUE a 0 0\r\nEND\r\n", &[b"a"], false));
        assert!(breached(b"VALUE a 0 0 1\r\n\r\nEND\r\n", &[b"a"], false), "a cas unique to a get");
        assert!(breached(b"VALUE a 0 0\r\n\r\nEND\r\n", &[b"a"], true), "no cas unique to a gets");
        assert!(breached(b"VALUE b 0 0\r\n\r\nEND\r\n", &[b"a"], false), "a key not asked for");
        assert!(breached(b"VALUE a 0 0\r\n\r\nVALUE a 0 0\r\n\r\nEND\r\n", &[b"a"], false), "twice");
        assert!(breached(b"VALUE b 0 0\r\n\r\nVALUE a 0 0\r\n\r\nEND\r\n", &[b"a", b"b"], false), "order");
        assert!(breached(b"END\n", &[b"a"], false), "a bare line feed");
        assert!(breached(b"VALUE a 0 1\r\n\r\n\r\nEND\r\n", &[b"a"], false), "a short block");
        assert!(breached(b"VALUE a 0 0\r\n\r\nSERVER_ERROR late\r\n", &[b"a"], false), "an error after items");
        assert_eq!(get(b"VALUE a 0 0\r\n\r\n", &[b"a"], false), Err(Breach::Lost), "the connection ended");
    }

    #[test]
    fn a_stream_out_of_step_is_named() {
        let mut conn: &[u8] = b"VERSION 1.6\r\nERROR\r\n";
        assert_eq!(now(Wire { conn: &mut conn }.in_step("a")), Ok(()));
        assert!(
            matches!(now(Wire { conn: &mut conn }.in_step("a")), Err(Breach::Contract(m)) if m.contains("out of step"))
        );
    }

    #[test]
    fn lines_are_classified_by_the_protocol_not_by_one_node() {
        assert_eq!(classify(b"END".to_vec()), Line::End);
        assert_eq!(classify(b"ERROR".to_vec()), Line::Error("ERROR".into()));
        assert!(matches!(classify(b"CLIENT_ERROR bad".to_vec()), Line::Error(_)));
        assert!(matches!(classify(b"SERVER_ERROR disk".to_vec()), Line::Error(_)));
        assert!(matches!(classify(b"ERRORS".to_vec()), Line::Other(_)));
        assert!(matches!(classify(b"END ".to_vec()), Line::Other(_)));
    }

    #[test]
    fn decimals_are_digits_only() {
        assert_eq!(decimal(b"0"), Some(0));
        assert_eq!(decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(decimal(b"18446744073709551616"), None);
        assert_eq!(decimal(b"+1"), None);
        assert_eq!(decimal(b""), None);
    }

    #[test]
    fn shown_bytes_are_escaped_and_cut() {
        assert_eq!(shown(b"a\r\n\xff"), "\"a\\r\\n\\xff\"");
        assert!(shown(&[b'x'; 100]).ends_with("... (100 bytes)\""));
    }
}
