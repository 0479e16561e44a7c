//! A bare madsim world of the reference scenario's shape, with no qsim code: what madsim itself
//! costs per simulated message, to hold qsim's cost per message against.
//!
//! 40 nodes in the reference tiers (a root, 4 mids under it, 8 regionals under the mids, 27
//! edges under the regionals), each below the root holding one TCP connection to its parent.
//! Over the same simulated time, each child sends requests of `message_bytes` and its parent
//! answers each one, until the network has carried the number of messages the qsim run did.
//! Every message costs a timer, as in qsim, where a paced sender or a read deadline sits behind
//! each one: the child sleeps before each request, the parent reads each under a timeout.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The reference scenario's tiers: (count, index of the first parent, parents in the tier above).
const TIERS: [(usize, usize, usize); 3] = [(4, 0, 1), (8, 1, 4), (27, 5, 8)];
const PORT: u16 = 7000;
/// The root and every tier.
pub const NODES: usize = 1 + TIERS[0].0 + TIERS[1].0 + TIERS[2].0;

fn ip(node: usize) -> std::net::IpAddr {
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 1, (node / 250) as u8, (node % 250 + 1) as u8))
}

/// What one bare run measured.
pub struct Bare {
    pub messages: u64,
    pub wall: Duration,
}

/// Runs the bare world under `seed` until about `messages` messages crossed the network over
/// `simulated`; returns the count madsim kept and the wall time the run took.
pub fn run(seed: u64, messages: u64, simulated: Duration, message_bytes: usize) -> Bare {
    // (child, parent) for every node below the root.
    let mut links = Vec::new();
    let mut next = 1;
    for (count, first_parent, parents) in TIERS {
        for i in 0..count {
            links.push((next, first_parent + i % parents));
            next += 1;
        }
    }
    let nodes = next;
    // Each round trip is two messages, spread evenly over the links.
    let round_trips = (messages / 2).max(links.len() as u64);
    let per_link = round_trips / links.len() as u64;
    let gap = simulated / per_link.max(1) as u32;
    let start = Instant::now();
    let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let carried = runtime.block_on(async move {
        let handle = madsim::runtime::Handle::current();
        let hosts: Vec<_> = (0..nodes).map(|n| handle.create_node().name(format!("n{n}")).ip(ip(n)).build()).collect();
        for (n, host) in hosts.iter().enumerate() {
            if !links.iter().any(|(_, parent)| *parent == n) {
                continue;
            }
            host.spawn(async move {
                let listener = TcpListener::bind((ip(n), PORT)).await.expect("bind");
                loop {
                    let (mut stream, _) = listener.accept().await.expect("accept");
                    tokio::spawn(async move {
                        let mut request = vec![0u8; message_bytes];
                        let deadline = gap * 4 + Duration::from_secs(1);
                        while let Ok(Ok(_)) = tokio::time::timeout(deadline, stream.read_exact(&mut request)).await {
                            if stream.write_all(&request).await.is_err() || stream.flush().await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
        }
        // Listeners first, then the children connect.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut children = Vec::new();
        for &(child, parent) in &links {
            children.push(hosts[child].spawn(async move {
                let mut stream = TcpStream::connect((ip(parent), PORT)).await.expect("connect");
                let mut message = vec![child as u8; message_bytes];
                for _ in 0..per_link {
                    tokio::time::sleep(gap).await;
                    stream.write_all(&message).await.expect("request");
                    stream.flush().await.expect("flush");
                    stream.read_exact(&mut message).await.expect("answer");
                }
            }));
        }
        for child in children {
            child.await.expect("a child finished");
        }
        madsim::net::NetSim::current().stat().msg_count
    });
    assert_eq!(nodes, NODES);
    Bare { messages: carried, wall: start.elapsed() }
}
