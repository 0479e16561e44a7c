//! The replication wire protocol against arbitrary input: every message round-trips, the decoder
//! never panics and is canonical (whatever it accepts re-encodes to the same bytes), damaged
//! frames are refused, and the async framing tells a clean end of stream from a torn frame and
//! refuses an oversized length before reading (or allocating for) its payload.

use proptest::prelude::*;
use qs_node::DatabaseId;
use qs_node::replication::protocol::{
    ClientHello, FRAME_BYTES_MAX, FrameType, Message, PROTOCOL_VERSION, ProtocolError, RefusalReason, UpstreamStatus,
    Want, read_message, write_message,
};
use qs_node::store::snapshot::SnapshotChunk;
use tokio::io::AsyncWriteExt;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

fn want() -> impl Strategy<Value = Want> {
    prop_oneof![
        Just(Want::Log),
        (any::<u64>(), prop::option::of("[0-9a-f]{0,64}|\\PC{0,8}"))
            .prop_map(|(resume_chunk, manifest_fingerprint)| Want::Snapshot { resume_chunk, manifest_fingerprint }),
        any::<u64>().prop_map(|member| Want::Raft { member }),
    ]
}

fn hello() -> impl Strategy<Value = ClientHello> {
    (
        prop_oneof![4 => Just(PROTOCOL_VERSION), 1 => any::<u16>()],
        any::<u128>(),
        any::<u128>(),
        any::<u64>(),
        any::<Option<u64>>(),
        any::<bool>(),
        want(),
        any::<u64>(),
    )
        .prop_map(|(version, client_id, db_id, last_index, stop_index, newest_only, want, root_ms)| ClientHello {
            version,
            client_id,
            db_id: DatabaseId(db_id),
            last_index,
            stop_index,
            newest_only,
            want,
            // Only this version's hello carries it; another's decodes with none.
            root_ms: if version == PROTOCOL_VERSION { root_ms } else { 0 },
        })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        hello().prop_map(Message::Hello),
        (any::<u128>(), any::<u128>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(server_id, db_id, applied_index, first_retained_index, root_ms)| Message::Welcome {
                server_id,
                db_id: DatabaseId(db_id),
                applied_index,
                first_retained_index,
                root_ms,
            }
        ),
        (prop::sample::select(RefusalReason::ALL.to_vec()), "\\PC{0,40}")
            .prop_map(|(reason, detail)| Message::Refused { reason, detail }),
        (prop::collection::vec(bytes(64), 0..8), any::<u64>())
            .prop_map(|(entries, root_ms)| Message::Entries { entries, root_ms }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(requested, first_retained)| Message::OutOfRetention { requested, first_retained }),
        (any::<u64>(), any::<u8>(), any::<u64>()).prop_map(|(applied_index, up, root_ms)| Message::Keepalive {
            applied_index,
            upstream: UpstreamStatus::from_wire(up),
            root_ms,
        }),
        bytes(200).prop_map(|manifest_json| Message::SnapshotManifest { manifest_json }),
        (bytes(200), any::<u64>()).prop_map(|(message, root_ms)| Message::Raft { message, root_ms }),
        (any::<u64>(), any::<u32>(), any::<u64>(), bytes(200), any::<u32>()).prop_map(
            |(number, file, offset, bytes, crc32c)| Message::SnapshotChunk(SnapshotChunk {
                number,
                file,
                offset,
                bytes,
                crc32c
            })
        ),
        Just(Message::SnapshotDone),
    ]
}

/// Splits an encoded frame into (frame type, payload), checking the length field.
fn split(frame: &[u8]) -> (u8, &[u8]) {
    let length = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(length, frame.len() - 4);
    (frame[4], &frame[5..])
}

/// Whatever the decoder accepts must re-encode to exactly the frame type and payload it read.
fn check_canonical(frame_type: u8, payload: &[u8]) {
    if let Ok(message) = Message::decode_frame(frame_type, payload) {
        let frame = message.encode();
        let (t, p) = split(&frame);
        assert_eq!(t, frame_type, "{message:?}");
        assert_eq!(p, payload, "{message:?} decoded from a payload it does not re-encode to");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_messages_round_trip(message in message()) {
        message.check_limits().unwrap();
        let frame = message.encode();
        let (frame_type, payload) = split(&frame);
        prop_assert_eq!(frame_type, message.frame_type() as u8);
        prop_assert_eq!(Message::decode_frame(frame_type, payload).unwrap(), message);
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics_and_is_canonical(frame_type in 0u8..=11, payload in bytes(300)) {
        check_canonical(frame_type, &payload);
    }

    /// Arbitrary bytes rarely get past the first field; bytes behind a valid prefix do.
    #[test]
    fn decoding_arbitrary_tails_of_valid_prefixes_is_canonical(
        message in message(),
        cut in any::<prop::sample::Index>(),
        tail in bytes(64),
    ) {
        let frame = message.encode();
        let (frame_type, payload) = split(&frame);
        let mut damaged = payload[..cut.index(payload.len() + 1)].to_vec();
        damaged.extend_from_slice(&tail);
        check_canonical(frame_type, &damaged);
    }

    #[test]
    fn flipped_and_truncated_frames_never_panic(
        message in message(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let frame = message.encode();
        let (frame_type, payload) = split(&frame);
        if !payload.is_empty() {
            let mut flipped = payload.to_vec();
            for (at, mask) in &flips {
                flipped[at.index(payload.len())] ^= mask;
            }
            check_canonical(frame_type, &flipped);
            check_canonical(frame_type ^ flips[0].1, &flipped);
        }
        let cut = cut.index(payload.len() + 1);
        let truncated = Message::decode_frame(frame_type, &payload[..cut]);
        if cut < payload.len() {
            prop_assert!(truncated.is_err(), "a strict prefix decoded: {:?}", truncated);
        }
    }
}

fn samples() -> Vec<Message> {
    vec![
        Message::Hello(ClientHello::new(7, DatabaseId(1), 0, Want::Log)),
        Message::Welcome { server_id: 8, db_id: DatabaseId(1), applied_index: 10, first_retained_index: 1, root_ms: 7 },
        Message::Entries { entries: vec![vec![1; 100], vec![2; 70_000]], root_ms: 8 },
        Message::Keepalive { applied_index: 10, upstream: UpstreamStatus::Healthy, root_ms: 9 },
        Message::SnapshotManifest { manifest_json: b"{}".to_vec() },
        Message::SnapshotChunk(SnapshotChunk { number: 0, file: 0, offset: 0, bytes: vec![9; 200_000], crc32c: 1 }),
        Message::SnapshotDone,
        Message::OutOfRetention { requested: 2, first_retained: 5 },
        Message::Refused { reason: RefusalReason::ShuttingDown, detail: "bye".into() },
    ]
}

#[tokio::test]
async fn messages_written_to_a_stream_read_back_in_order_then_a_clean_end() {
    // A small pipe, so large frames cross it in many pieces while the writer still writes.
    let (mut client, mut server) = tokio::io::duplex(4096);
    let sent = samples();
    let writer = async {
        for message in &sent {
            write_message(&mut client, message).await.unwrap();
        }
        drop(client);
    };
    let reader = async {
        let mut received = vec![];
        while let Some(message) = read_message(&mut server).await.unwrap() {
            received.push(message);
        }
        received
    };
    let ((), received) = tokio::join!(writer, reader);
    assert_eq!(received, sent);
}

#[tokio::test]
async fn a_length_over_the_max_is_refused_from_the_header_alone() {
    let (mut client, mut server) = tokio::io::duplex(64);
    for length in [FRAME_BYTES_MAX as u32 + 1, u32::MAX] {
        // Only the header is sent and the writer stays open: if the reader allocated or waited
        // for the claimed payload, this would hang or abort instead of returning an error.
        client.write_all(&length.to_le_bytes()).await.unwrap();
        let err = read_message(&mut server).await.unwrap_err();
        assert!(matches!(err, ProtocolError::FrameTooLarge { length: l, .. } if l == length), "{err}");
    }
}

#[tokio::test]
async fn an_http_request_is_refused_as_text() {
    let (mut client, mut server) = tokio::io::duplex(64);
    client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let err = read_message(&mut server).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("\"GET \"") && text.contains("not speaking the qsim replication protocol"), "{text}");
}

#[tokio::test]
async fn end_of_stream_mid_frame_is_an_error_between_frames_is_none() {
    let frame = Message::Keepalive { applied_index: 3, upstream: UpstreamStatus::Healthy, root_ms: 4 }.encode();
    // Cut inside the length, right after it, and inside the payload.
    for cut in [1, 3, 4, 5, frame.len() - 1] {
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(&frame).await.unwrap();
        client.write_all(&frame[..cut]).await.unwrap();
        drop(client);
        assert_eq!(
            read_message(&mut server).await.unwrap(),
            Some(Message::Keepalive { applied_index: 3, upstream: UpstreamStatus::Healthy, root_ms: 4 })
        );
        let err = read_message(&mut server).await.unwrap_err();
        assert!(matches!(err, ProtocolError::UnexpectedEof { .. }), "cut at {cut}: {err}");
    }
    let (client, mut server) = tokio::io::duplex(64);
    drop(client);
    assert!(read_message(&mut server).await.unwrap().is_none());
}

#[tokio::test]
async fn a_message_over_its_limits_is_not_sent() {
    let (mut client, mut server) = tokio::io::duplex(64);
    let over = Message::Refused { reason: RefusalReason::BadHandshake, detail: "x".repeat(5000) };
    let err = write_message(&mut client, &over).await.unwrap_err();
    assert!(matches!(err, ProtocolError::Limit { frame: FrameType::Refused, limit: "DETAIL_BYTES_MAX", .. }), "{err}");
    drop(client);
    assert!(read_message(&mut server).await.unwrap().is_none(), "nothing was written");
}

#[tokio::test]
async fn an_empty_frame_and_an_unknown_type_are_refused() {
    let (mut client, mut server) = tokio::io::duplex(64);
    client.write_all(&0u32.to_le_bytes()).await.unwrap();
    assert!(matches!(read_message(&mut server).await, Err(ProtocolError::EmptyFrame)));
    client.write_all(&[1, 0, 0, 0, 200]).await.unwrap();
    assert!(matches!(read_message(&mut server).await, Err(ProtocolError::UnknownFrameType { found: 200 })));
}
