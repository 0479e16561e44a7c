//! The carried madsim patch's count of accepted connections (`NetSim::tcp_accepted`,
//! `vendor/README.md`): per node and local port, what its listeners' `accept` returned since the
//! node last started — not a connection waiting unaccepted, not another port's — and a kill
//! starts it again from zero, as a new process's counters do. The `contract` checker's listener
//! counts judge a node's connection metrics against it.
#![cfg(madsim)]

use std::net::SocketAddr;
use std::time::Duration;

use madsim::net::{NetSim, TcpListener, TcpStream};
use madsim::runtime::Runtime;
use madsim::time::sleep;

fn at(port: u16) -> SocketAddr {
    SocketAddr::new("10.0.0.1".parse().expect("an address"), port)
}

#[test]
fn accepted_connections_are_counted_per_port_and_a_kill_starts_again() {
    let runtime = Runtime::with_seed_and_config(3, madsim::Config::default());
    let handle = runtime.handle().clone();
    runtime.block_on(async move {
        // Ports 7000 and 7001 accept everything; 7002 is bound but never accepts.
        let server = handle
            .create_node()
            .ip(at(0).ip())
            .init(|| async {
                let waiting = TcpListener::bind(at(7002)).await.expect("bind 7002");
                for port in [7000, 7001] {
                    let listener = TcpListener::bind(at(port)).await.expect("bind");
                    madsim::task::spawn(async move {
                        let mut held = Vec::new();
                        while let Ok((stream, _)) = listener.accept().await {
                            held.push(stream);
                        }
                    });
                }
                std::future::pending::<()>().await;
                drop(waiting);
            })
            .build();
        let client = handle.create_node().ip("10.0.0.2".parse().expect("an address")).build();
        let dial = |ports: Vec<u16>| {
            client.spawn(async move {
                let mut open = Vec::new();
                for port in ports {
                    open.push(TcpStream::connect(at(port)).await.expect("connect"));
                }
                sleep(Duration::from_secs(1)).await;
                drop(open);
            })
        };
        sleep(Duration::from_millis(100)).await; // the listeners bind first
        dial(vec![7000, 7000, 7001, 7000, 7002]).await.expect("the client ran");
        let net = NetSim::current();
        let counts = |net: &NetSim| [7000, 7001, 7002].map(|port| net.tcp_accepted(server.id(), port));
        assert_eq!(counts(&net), [3, 1, 0], "per port, and only what accept returned");
        assert_eq!(net.tcp_accepted(client.id(), 7000), 0, "per node");

        handle.kill(server.id());
        assert_eq!(counts(&net), [0, 0, 0], "a kill starts the count again");
        handle.restart(server.id());
        sleep(Duration::from_millis(100)).await;
        dial(vec![7001]).await.expect("the client ran");
        assert_eq!(counts(&net), [0, 1, 0]);
    });
}
