//! The `membership` fault: an operator changes the root group's voters.
//!
//! Fault model: from the producers' host, the operator sends `POST /v1/root/members` (`{"add":
//! [...], "remove": [...]}`, with the members' operator token) to the target member, as
//! `qs-node members` does: a redirect (307) is followed to the leader it names; no leader, a
//! change pending or an election (503), no answer or a lost connection are asked again of the
//! next member half a second later; an answer that leaves the outcome unknown (500) or says a
//! member is already (not) a voter (409: an earlier try may have been made) is settled by reading
//! the configuration. It asks until the change is made or the safety phase ends. Once made, each
//! removed member is retired as an operator retires a machine: stopped for good, recorded as a
//! `membership` fault on it that never ends (`retire`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long the operator waits before asking again.
const ASK_AGAIN_AFTER: Duration = Duration::from_millis(500);
/// How long the operator waits for a connection.
const CONNECT_WITHIN: Duration = Duration::from_secs(2);
/// How long one request may take: a member waits up to `MEMBERSHIP_CHANGE_TIMEOUT` for the
/// change to be made.
const ANSWER_WITHIN: Duration = Duration::from_secs(15);

/// One operator, as its fault started.
pub struct Operator {
    /// The root group's members: id → (name, HTTP address).
    pub members: BTreeMap<u64, (String, SocketAddr)>,
    /// The member asked first (the fault's target, resolved).
    pub target: String,
    pub add: Vec<u64>,
    pub remove: Vec<u64>,
    /// When the safety phase ends: the operator stops asking.
    pub until: madsim::time::Instant,
    /// Stops a removed member for good and records it.
    pub retire: Box<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("target", &self.target)
            .field("add", &self.add)
            .field("remove", &self.remove)
            .finish_non_exhaustive()
    }
}

/// What one request came to.
#[derive(Debug)]
enum Answer {
    /// Made: the configuration now has the change.
    Made,
    /// Ask this address instead (a redirect to the leader).
    Elsewhere(SocketAddr),
    /// Ask again shortly (503, no answer, a broken connection; or an outcome to settle).
    Again(String),
    /// The member refused it for good (400): asking again would change nothing.
    Refused(String),
}

impl Operator {
    pub async fn run(self) {
        let mut asked = self.members.values().find(|(name, _)| *name == self.target).map(|(_, http)| *http);
        let mut next = 0;
        while madsim::time::Instant::now() < self.until {
            let http = asked.take().unwrap_or_else(|| {
                next += 1;
                self.members.values().nth(next % self.members.len()).expect("a group has members").1
            });
            match self.ask(http).await {
                Answer::Made => {
                    tracing::info!(add = ?self.add, remove = ?self.remove, "membership change made");
                    for id in &self.remove {
                        if let Some((name, _)) = self.members.get(id) {
                            (self.retire)(name);
                        }
                    }
                    return;
                }
                Answer::Elsewhere(leader) => asked = Some(leader),
                Answer::Again(why) => {
                    tracing::debug!(%http, why, "membership change not made yet");
                    madsim::time::sleep(ASK_AGAIN_AFTER).await;
                }
                Answer::Refused(why) => {
                    tracing::warn!(%http, why, "membership change refused");
                    return;
                }
            }
        }
    }

    async fn ask(&self, http: SocketAddr) -> Answer {
        let body = serde_json::json!({ "add": self.add, "remove": self.remove }).to_string();
        let request = format!(
            "POST /v1/root/members HTTP/1.1\r\nhost: {http}\r\nauthorization: Bearer {}\r\ncontent-type: \
             application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            crate::scenario::nodes::OPERATOR_TOKEN,
            body.len()
        );
        let (status, location, text) = match exchange(http, &request).await {
            Ok(answer) => answer,
            Err(e) => return Answer::Again(e),
        };
        match status {
            200 => Answer::Made,
            307 => match location.and_then(|l| l.strip_prefix("http://")?.split('/').next()?.parse().ok()) {
                Some(leader) => Answer::Elsewhere(leader),
                None => Answer::Again(format!("a redirect without a usable location: {text}")),
            },
            // Unknown, or already (not) a voter: an earlier try may have made it.
            500 | 409 => match self.configuration(http).await {
                Some(true) => Answer::Made,
                _ => Answer::Again(text),
            },
            400..=499 => Answer::Refused(text),
            _ => Answer::Again(text),
        }
    }

    /// Whether the configuration `http` applied has the change (outside joint consensus).
    async fn configuration(&self, http: SocketAddr) -> Option<bool> {
        let request = format!("GET /v1/root/members HTTP/1.1\r\nhost: {http}\r\nconnection: close\r\n\r\n");
        let (status, _, text) = exchange(http, &request).await.ok()?;
        let body: serde_json::Value = serde_json::from_str(&text).ok().filter(|_| status == 200)?;
        let ids = |field: &str| -> Vec<u64> {
            body[field].as_array().map(|a| a.iter().filter_map(|v| v.as_u64()).collect()).unwrap_or_default()
        };
        let (voters, outgoing) = (ids("voters"), ids("outgoing"));
        Some(
            outgoing.is_empty()
                && self.add.iter().all(|id| voters.contains(id))
                && !self.remove.iter().any(|id| voters.contains(id)),
        )
    }
}

/// Whether `answer` holds its whole head and the body its `content-length` announces.
fn complete(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&answer[..end]);
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    answer.len() >= end + 4 + length
}

/// Sends `request` to `http` and reads the whole answer: its status, `Location` and body.
async fn exchange(http: SocketAddr, request: &str) -> Result<(u16, Option<String>, String), String> {
    let exchange = async {
        // A host that is down answers no SYN: the next member is asked rather than waiting.
        let mut stream = tokio::time::timeout(CONNECT_WITHIN, tokio::net::TcpStream::connect(http))
            .await
            .map_err(|_| format!("no connection within {CONNECT_WITHIN:?}"))?
            .map_err(|e| e.to_string())?;
        stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
        // madsim's stream sends what was written only once flushed.
        stream.flush().await.map_err(|e| e.to_string())?;
        // Until the body its content-length announces is in (the member may keep the
        // connection open).
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let read = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if read == 0 {
                break;
            }
            answer.extend_from_slice(&chunk[..read]);
            if complete(&answer) {
                break;
            }
        }
        Ok::<_, String>(answer)
    };
    let answer = tokio::time::timeout(ANSWER_WITHIN, exchange)
        .await
        .map_err(|_| format!("no answer within {ANSWER_WITHIN:?}"))??;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("an answer without a header end")?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1)?.parse().ok())
        .ok_or_else(|| format!("not an HTTP status line: {head}"))?;
    let location = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("location"))
        .map(|(_, value)| value.trim().to_string());
    Ok((status, location, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::complete;

    #[test]
    fn an_answer_is_complete_once_its_announced_body_is_in() {
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 7\r\n\r\n";
        assert!(!complete(&head[..20]), "the head is not all in");
        let mut answer = head.to_vec();
        answer.extend_from_slice(b"{\"in");
        assert!(!complete(&answer), "4 of 7 body bytes");
        answer.extend_from_slice(b"\":1}");
        assert!(complete(&answer));
        assert!(complete(b"HTTP/1.1 503 Service Unavailable\r\n\r\n"), "no body announced: none");
    }
}
