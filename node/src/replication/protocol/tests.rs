//! The protocol's encoding against its documented layout, and its decoder against truncated,
//! oversized, out-of-range and trailing bytes.

use super::*;
use crate::entry::{ChainHash, LogEntry, Op};

fn hello(want: Want) -> ClientHello {
    ClientHello {
        version: PROTOCOL_VERSION,
        client_id: 0x0123_4567_89ab_cdef_0011_2233_4455_6677,
        db_id: DatabaseId(42),
        last_index: 7,
        stop_index: Some(99),
        newest_only: true,
        want,
        root_ms: 1_700_000_000_123,
    }
}

fn samples() -> Vec<Message> {
    let entry = LogEntry::seal(
        1,
        DatabaseId(42),
        1_700_000_000_000,
        ChainHash::GENESIS,
        vec![Op::Set { key: b"hello".to_vec(), value: b"world".to_vec() }],
    )
    .unwrap();
    let mut out = vec![
        Message::Hello(hello(Want::Log)),
        Message::Hello(ClientHello::new(u128::MAX, DatabaseId(0), 0, Want::Log)),
        Message::Hello(hello(Want::Snapshot { resume_chunk: 0, manifest_fingerprint: None })),
        Message::Hello(hello(Want::Snapshot { resume_chunk: 17, manifest_fingerprint: Some("ab".repeat(32)) })),
        Message::Welcome {
            server_id: 5,
            db_id: DatabaseId(42),
            applied_index: 100,
            first_retained_index: 60,
            root_ms: 1_700_000_000_000,
        },
        Message::Entries { entries: vec![], root_ms: 1 },
        Message::Entries { entries: vec![entry.compress(), vec![], vec![1, 2, 3]], root_ms: u64::MAX },
        Message::OutOfRetention { requested: 8, first_retained: 60 },
        Message::Keepalive { applied_index: u64::MAX, upstream: UpstreamStatus::Healthy, root_ms: u64::MAX },
        Message::Keepalive { applied_index: 3, upstream: UpstreamStatus::Recovering { hops: 2 }, root_ms: 0 },
        Message::SnapshotManifest { manifest_json: br#"{"format":1}"#.to_vec() },
        Message::SnapshotManifest { manifest_json: vec![] },
        Message::SnapshotChunk(SnapshotChunk {
            number: 3,
            file: 1,
            offset: 3 << 20,
            bytes: vec![0xaa; 1000],
            crc32c: 0xdead_beef,
        }),
        Message::SnapshotDone,
        Message::Hello(hello(Want::Raft { member: 3 })),
        Message::Raft { message: vec![8, 1, 16, 2], root_ms: 9 },
        Message::Raft { message: vec![], root_ms: 0 },
    ];
    for &reason in RefusalReason::ALL {
        out.push(Message::Refused { reason, detail: format!("{reason}: détail") });
    }
    out
}

fn decode(frame: &[u8]) -> Result<Message, ProtocolError> {
    let length = frame_length(frame[..4].try_into().unwrap())?;
    assert_eq!(length, frame.len() - 4, "length field counts the frame type and payload");
    Message::decode_frame(frame[4], &frame[5..])
}

#[test]
fn every_variant_round_trips() {
    for message in samples() {
        message.check_limits().unwrap();
        let frame = message.encode();
        assert_eq!(frame[4], message.frame_type() as u8);
        assert_eq!(decode(&frame).unwrap(), message, "frame {frame:02x?}");
    }
}

#[test]
fn every_frame_type_has_a_sample() {
    let samples = samples();
    for &t in FrameType::ALL {
        assert!(samples.iter().any(|m| m.frame_type() == t), "no sample of {t}");
        assert_eq!(FrameType::from_u8(t as u8), Some(t));
    }
    assert_eq!(FrameType::from_u8(0), None);
    assert_eq!(FrameType::from_u8(11), None);
}

#[test]
fn every_refusal_reason_round_trips_and_codes_are_distinct() {
    for (i, reason) in RefusalReason::ALL.iter().copied().enumerate() {
        assert_eq!(reason as u8, i as u8 + 1);
        assert_eq!(RefusalReason::from_u8(reason as u8), Some(reason));
        let message = Message::Refused { reason, detail: String::new() };
        assert_eq!(decode(&message.encode()).unwrap(), message);
    }
    assert_eq!(RefusalReason::from_u8(0), None);
    // The first code past the last reason.
    let unknown = RefusalReason::ALL.len() as u8 + 1;
    assert_eq!(RefusalReason::from_u8(unknown), None);
    let mut frame = Message::Refused { reason: RefusalReason::ShuttingDown, detail: "x".into() }.encode();
    frame[5] = unknown;
    let err = decode(&frame).unwrap_err();
    assert!(
        matches!(err, ProtocolError::BadValue { frame: FrameType::Refused, found, .. } if found == unknown),
        "{err}"
    );
    assert!(err.to_string().contains(&format!("Refused frame: reason is {unknown}")), "{err}");
}

/// Pins the layout table in the module doc: a change here is a protocol change.
#[test]
fn layout_matches_the_documented_table() {
    let message = Message::Hello(ClientHello {
        version: 1,
        client_id: 2,
        db_id: DatabaseId(3),
        last_index: 4,
        stop_index: Some(5),
        newest_only: true,
        want: Want::Snapshot { resume_chunk: 6, manifest_fingerprint: Some("f".into()) },
        root_ms: 0, // a version-1 hello carries none
    });
    let mut expected = vec![];
    expected.extend_from_slice(b"QSRP");
    expected.extend_from_slice(&1u16.to_le_bytes());
    expected.extend_from_slice(&2u128.to_le_bytes());
    expected.extend_from_slice(&3u128.to_le_bytes());
    expected.extend_from_slice(&4u64.to_le_bytes());
    expected.push(1);
    expected.extend_from_slice(&5u64.to_le_bytes());
    expected.push(1);
    expected.push(2);
    expected.extend_from_slice(&6u64.to_le_bytes());
    expected.push(1);
    expected.extend_from_slice(&1u32.to_le_bytes());
    expected.push(b'f');
    let frame = message.encode();
    assert_eq!(&frame[..4], &(expected.len() as u32 + 1).to_le_bytes());
    assert_eq!(frame[4], 1);
    assert_eq!(&frame[5..], &expected[..]);

    assert_eq!(
        Message::Keepalive { applied_index: 0x0102, upstream: UpstreamStatus::Recovering { hops: 2 }, root_ms: 0x0304 }
            .encode(),
        [18, 0, 0, 0, 6, 2, 1, 0, 0, 0, 0, 0, 0, 2, 4, 3, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(Message::SnapshotDone.encode(), [1, 0, 0, 0, 9]);
    let chunk = SnapshotChunk { number: 1, file: 2, offset: 3, bytes: vec![0xee], crc32c: 4 };
    let frame = Message::SnapshotChunk(chunk).encode();
    assert_eq!(frame.len(), 4 + 1 + CHUNK_HEADER_BYTES + 1);
    assert_eq!(&frame[5..], [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0xee]);
}

#[test]
fn wrong_magic_is_refused_naming_what_arrived() {
    let mut frame = Message::Hello(hello(Want::Log)).encode();
    frame[5..9].copy_from_slice(b"GET ");
    let err = decode(&frame).unwrap_err();
    assert!(matches!(err, ProtocolError::BadMagic { found } if &found == b"GET "), "{err}");
    assert!(err.to_string().contains("\"GET \" where \"QSRP\" was expected"), "{err}");
}

#[test]
fn text_where_a_length_should_be_says_the_peer_speaks_text() {
    for text in [b"GET ", b"get ", b"stat", b"POST"] {
        let err = frame_length(*text).unwrap_err();
        assert!(matches!(err, ProtocolError::FrameTooLarge { .. }), "{err}");
        assert!(err.to_string().contains("not speaking the qsim replication protocol"), "{err}");
    }
    let err = frame_length([0xff; 4]).unwrap_err();
    assert!(!err.to_string().contains("as text"), "{err}");
    assert!(matches!(frame_length([0; 4]), Err(ProtocolError::EmptyFrame)));
    let max = u32::try_from(FRAME_BYTES_MAX).unwrap();
    assert_eq!(frame_length(max.to_le_bytes()).unwrap(), FRAME_BYTES_MAX);
    assert!(frame_length((max + 1).to_le_bytes()).is_err());
}

#[test]
fn hello_of_another_version_decodes_so_the_server_can_refuse_it() {
    for version in [0, 2, u16::MAX] {
        let message = Message::Hello(ClientHello { version, ..hello(Want::Log) });
        match decode(&message.encode()).unwrap() {
            Message::Hello(h) => assert_eq!(h.version, version),
            other => panic!("decoded {other:?}"),
        }
    }
    // This version's carries the client's root time.
    match decode(&Message::Hello(hello(Want::Log)).encode()).unwrap() {
        Message::Hello(h) => assert_eq!(h.root_ms, 1_700_000_000_123),
        other => panic!("decoded {other:?}"),
    }
}

#[test]
fn every_truncation_and_any_trailing_byte_is_an_error() {
    for message in samples() {
        let frame = message.encode();
        let payload = &frame[5..];
        for cut in 0..payload.len() {
            let err = Message::decode_frame(frame[4], &payload[..cut]).unwrap_err();
            assert!(matches!(err, ProtocolError::Truncated { .. }), "{message:?} cut at {cut}: {err}");
        }
        let mut long = payload.to_vec();
        long.push(0);
        let err = Message::decode_frame(frame[4], &long).unwrap_err();
        assert!(matches!(err, ProtocolError::TrailingBytes { count: 1, .. }), "{err}");
    }
}

#[test]
fn out_of_range_tags_name_their_field() {
    let frame = Message::Hello(hello(Want::Snapshot { resume_chunk: 1, manifest_fingerprint: None })).encode();
    // Payload offsets: stop index tag at 46, newest only at 55, want at 56, fingerprint tag at 65.
    for (offset, field) in [(46, "stop index tag"), (55, "newest only"), (56, "want"), (65, "manifest fingerprint tag")]
    {
        let mut payload = frame[5..].to_vec();
        payload[offset] = 9;
        let err = Message::decode_frame(1, &payload).unwrap_err();
        assert!(
            matches!(&err, ProtocolError::BadValue { field: f, found: 9, .. } if f == field),
            "offset {offset}: {err}"
        );
    }
    let err = Message::decode_frame(0, &[]).unwrap_err();
    assert!(matches!(err, ProtocolError::UnknownFrameType { found: 0 }), "{err}");
}

#[test]
fn invalid_utf8_is_refused() {
    let mut frame = Message::Refused { reason: RefusalReason::BadHandshake, detail: "ab".into() }.encode();
    let end = frame.len();
    frame[end - 1] = 0xff;
    let err = decode(&frame).unwrap_err();
    assert!(matches!(err, ProtocolError::BadUtf8 { frame: FrameType::Refused, .. }), "{err}");
}

#[test]
fn counts_and_lengths_over_their_limits_are_refused_before_allocating() {
    // An entry count over the limit, with nothing behind it.
    let payload = (ENTRIES_PER_FRAME_MAX as u32 + 1).to_le_bytes();
    let err = Message::decode_frame(4, &payload).unwrap_err();
    assert!(matches!(err, ProtocolError::Limit { limit: "ENTRIES_PER_FRAME_MAX", .. }), "{err}");
    // A count within the limit that the payload cannot hold.
    let err = Message::decode_frame(4, &1000u32.to_le_bytes()).unwrap_err();
    assert!(matches!(err, ProtocolError::Truncated { .. }), "{err}");
    // A manifest length of 4 GiB - 1.
    let err = Message::decode_frame(7, &u32::MAX.to_le_bytes()).unwrap_err();
    assert!(matches!(err, ProtocolError::Limit { limit: "MANIFEST_BYTES_MAX", .. }), "{err}");
    // A fingerprint over its limit is refused when sending, too.
    let long = Want::Snapshot { resume_chunk: 0, manifest_fingerprint: Some("x".repeat(FINGERPRINT_BYTES_MAX + 1)) };
    let message = Message::Hello(hello(long));
    assert!(matches!(message.check_limits(), Err(ProtocolError::Limit { limit: "FINGERPRINT_BYTES_MAX", .. })));
    assert!(matches!(decode(&message.encode()), Err(ProtocolError::Limit { limit: "FINGERPRINT_BYTES_MAX", .. })));
    let message = Message::Refused { reason: RefusalReason::ShuttingDown, detail: "x".repeat(DETAIL_BYTES_MAX + 1) };
    assert!(message.check_limits().is_err());
    assert!(decode(&message.encode()).is_err());
}

#[test]
fn entries_total_is_bounded() {
    let big = vec![0u8; ENTRY_COMPRESSED_BYTES_MAX];
    let fits = Message::Entries { entries: vec![big.clone()], root_ms: 0 };
    fits.check_limits().unwrap();
    assert_eq!(decode(&fits.encode()).unwrap(), fits);
    let over = Message::Entries { entries: vec![big.clone(), big], root_ms: 0 };
    assert!(matches!(over.check_limits(), Err(ProtocolError::Limit { limit: "ENTRIES_BYTES_MAX", .. })));
    assert!(matches!(decode(&over.encode()), Err(ProtocolError::Limit { limit: "ENTRIES_BYTES_MAX", .. })));
}

#[test]
fn a_maximal_chunk_is_exactly_the_largest_frame() {
    let max = CHUNK_BYTES_MAX as usize;
    let chunk = SnapshotChunk { number: 0, file: 0, offset: 0, bytes: vec![7; max], crc32c: 0 };
    let message = Message::SnapshotChunk(chunk);
    message.check_limits().unwrap();
    let frame = message.encode();
    assert_eq!(frame.len(), 4 + FRAME_BYTES_MAX);
    assert_eq!(decode(&frame).unwrap(), message);
    let Message::SnapshotChunk(mut chunk) = message else { unreachable!() };
    chunk.bytes.push(7);
    let over = Message::SnapshotChunk(chunk);
    assert!(matches!(over.check_limits(), Err(ProtocolError::Limit { limit: "CHUNK_BYTES_MAX", .. })));
    let frame = over.encode();
    assert!(matches!(frame_length(frame[..4].try_into().unwrap()), Err(ProtocolError::FrameTooLarge { .. })));
    assert!(Message::decode_frame(frame[4], &frame[5..]).is_err());
}

#[test]
fn compressed_entries_survive_the_trip() {
    let mut prev = ChainHash::GENESIS;
    let mut entries = vec![];
    for index in 1..=3 {
        let entry = LogEntry::seal(
            index,
            DatabaseId(9),
            index * 1000,
            prev,
            vec![Op::Set { key: format!("k{index}").into_bytes(), value: vec![index as u8; 300] }],
        )
        .unwrap();
        prev = entry.hash;
        entries.push(entry);
    }
    let message = Message::Entries { entries: entries.iter().map(LogEntry::compress).collect(), root_ms: 0 };
    let Message::Entries { entries: received, .. } = decode(&message.encode()).unwrap() else { panic!() };
    let decoded: Vec<LogEntry> = received.iter().map(|c| LogEntry::decompress(c).unwrap()).collect();
    assert_eq!(decoded, entries);
}

#[test]
fn compressed_entry_bound_is_snappys_worst_case() {
    assert_eq!(ENTRY_COMPRESSED_BYTES_MAX, snap::raw::max_compress_len(ENTRY_BYTES_MAX));
}
