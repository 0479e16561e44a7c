//! Raft records and messages as raft-rs's former codec (rust-protobuf 2.28, its `protobuf-codec`)
//! wrote them, decoded and encoded again by the codec the node uses now (prost 0.11, raft-rs's
//! `prost-codec`). A store keeps Raft entries, hard states and snapshots in that encoding, and a
//! root member that was not upgraded yet still sends it, so both must keep decoding to the same
//! fields.
//!
//! The bytes were printed by `protobuf::Message::write_to_bytes` on the values built in
//! [`values`], at 70a187a (before the switch). Encoded again, the entries, hard states and
//! snapshots raft-rs makes are the same bytes. One difference remains, the encoding's own
//! freedom, which every decoder accepts and which changes no length: rust-protobuf wrote fields
//! in the order `eraftpb.proto` declares them, prost in the order of their numbers. So an
//! `Entry`'s `context` (6) came before `sync_log` (5) — raft-rs never sets `sync_log`,
//! deprecated — and a `Message`'s `commit_term` (15) before `snapshot` (9), `reject` (10),
//! `reject_hint` (11), `context` (12), `request_snapshot` (13) and `deprecated_priority` (14),
//! as in a rejected vote.
//!
//! Another would have been: rust-protobuf 2 wrote proto3's `repeated uint64` fields unpacked
//! (one key per value), and prost packs them (proto3's default) unless told not to. The carried
//! raft-proto tells it not to for `ConfState`'s four lists
//! (`vendor/raft-proto/proto/eraftpb.proto`), so that a snapshot's metadata stays the bytes it
//! was; packed, three voters would take one byte less and five three less. Packed lists still
//! decode.

use prost::Message as _;
use raft::prelude::{ConfState, Entry, EntryType, HardState, Message, MessageType, Snapshot};

/// A normal entry with data and a context.
const ENTRY: &str = "10031807220b62617463682062797465733203637478";
/// A configuration change entry with the deprecated `sync_log` set.
const CONF_ENTRY: &str = "08021002180122061204080010023201632801";
const HARD_STATE: &str = "0805100218ac02";
/// A snapshot with data and metadata: voters 1, 2, 3 and learner 4.
const SNAPSHOT: &str = "0a0b73746f726520706f696e74120e0a08080108020803100410281805";
/// An append carrying [`ENTRY`] and [`CONF_ENTRY`].
const APPEND: &str = "0803100218012005280230063a1610031807220b626174636820627974657332036374783a13080210021801220612040800100232016328014006";
/// A rejected vote, with the commit and its term (as raft-rs sends one).
const VOTE_REJECT: &str = "0806100318022005400678045001";
/// A snapshot message carrying [`SNAPSHOT`].
const SNAPSHOT_MESSAGE: &str = "08071003180120054a1d0a0b73746f726520706f696e74120e0a08080108020803100410281805";

/// What prost writes for [`CONF_ENTRY`]: `sync_log` (field 5) before `context` (6).
const CONF_ENTRY_PROST: &str = "08021002180122061204080010022801320163";
/// What prost writes for [`APPEND`]: its configuration change entry as [`CONF_ENTRY_PROST`].
const APPEND_PROST: &str = "0803100218012005280230063a1610031807220b626174636820627974657332036374783a13080210021801220612040800100228013201634006";
/// What prost writes for [`VOTE_REJECT`]: `reject` (field 10) before `commit_term` (15).
const VOTE_REJECT_PROST: &str = "0806100318022005400650017804";

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// The values the old codec encoded into the constants above.
struct Values {
    entry: Entry,
    conf_entry: Entry,
    hard_state: HardState,
    snapshot: Snapshot,
    append: Message,
    vote_reject: Message,
    snapshot_message: Message,
}

fn values() -> Values {
    let mut entry = Entry::default();
    entry.set_entry_type(EntryType::EntryNormal);
    (entry.term, entry.index) = (3, 7);
    entry.data = b"batch bytes".to_vec();
    entry.context = b"ctx".to_vec();
    let mut conf_entry = Entry::default();
    conf_entry.set_entry_type(EntryType::EntryConfChangeV2);
    (conf_entry.term, conf_entry.index) = (2, 1);
    conf_entry.data = vec![0x12, 0x04, 0x08, 0x00, 0x10, 0x02];
    conf_entry.sync_log = true;
    conf_entry.context = b"c".to_vec();
    let mut hard_state = HardState::default();
    (hard_state.term, hard_state.vote, hard_state.commit) = (5, 2, 300);
    let mut snapshot = Snapshot { data: b"store point".to_vec(), ..Default::default() };
    let metadata = snapshot.mut_metadata();
    (metadata.index, metadata.term) = (40, 5);
    metadata.set_conf_state(ConfState::from((vec![1, 2, 3], vec![4])));
    let mut append = Message::default();
    append.set_msg_type(MessageType::MsgAppend);
    (append.to, append.from, append.term, append.log_term, append.index, append.commit) = (2, 1, 5, 2, 6, 6);
    append.entries = vec![entry.clone(), conf_entry.clone()];
    let mut vote_reject = Message::default();
    vote_reject.set_msg_type(MessageType::MsgRequestVoteResponse);
    (vote_reject.to, vote_reject.from, vote_reject.term) = (3, 2, 5);
    vote_reject.reject = true;
    (vote_reject.commit, vote_reject.commit_term) = (6, 4);
    let mut snapshot_message = Message::default();
    snapshot_message.set_msg_type(MessageType::MsgSnapshot);
    (snapshot_message.to, snapshot_message.from, snapshot_message.term) = (3, 1, 5);
    snapshot_message.set_snapshot(snapshot.clone());
    Values { entry, conf_entry, hard_state, snapshot, append, vote_reject, snapshot_message }
}

#[test]
fn what_the_old_codec_wrote_decodes_to_the_same_fields() {
    let v = values();
    let entry = Entry::decode(bytes(ENTRY).as_slice()).unwrap();
    assert_eq!(entry.get_entry_type(), EntryType::EntryNormal);
    assert_eq!((entry.term, entry.index, entry.sync_log), (3, 7, false));
    assert_eq!((entry.data.as_slice(), entry.context.as_slice()), (&b"batch bytes"[..], &b"ctx"[..]));
    assert_eq!(entry, v.entry);

    let conf_entry = Entry::decode(bytes(CONF_ENTRY).as_slice()).unwrap();
    assert_eq!(conf_entry.get_entry_type(), EntryType::EntryConfChangeV2);
    assert_eq!((conf_entry.term, conf_entry.index, conf_entry.sync_log), (2, 1, true));
    assert_eq!(conf_entry.data, [0x12, 0x04, 0x08, 0x00, 0x10, 0x02]);
    assert_eq!(conf_entry.context, b"c");
    assert_eq!(conf_entry, v.conf_entry);

    let hard_state = HardState::decode(bytes(HARD_STATE).as_slice()).unwrap();
    assert_eq!((hard_state.term, hard_state.vote, hard_state.commit), (5, 2, 300));
    assert_eq!(hard_state, v.hard_state);

    let snapshot = Snapshot::decode(bytes(SNAPSHOT).as_slice()).unwrap();
    assert_eq!(snapshot.data, b"store point");
    assert!(!snapshot.is_empty());
    let metadata = snapshot.get_metadata();
    assert_eq!((metadata.index, metadata.term), (40, 5));
    assert_eq!(metadata.get_conf_state().voters, [1, 2, 3]);
    assert_eq!(metadata.get_conf_state().learners, [4]);
    assert!(metadata.get_conf_state().voters_outgoing.is_empty() && !metadata.get_conf_state().auto_leave);
    assert_eq!(snapshot, v.snapshot);

    let append = super::decode(&bytes(APPEND)).unwrap();
    assert_eq!(append.get_msg_type(), MessageType::MsgAppend);
    assert_eq!((append.to, append.from, append.term, append.log_term, append.index), (2, 1, 5, 2, 6));
    assert_eq!((append.commit, append.commit_term, append.reject), (6, 0, false));
    assert_eq!(append.entries, [v.entry.clone(), v.conf_entry.clone()]);
    assert!(append.snapshot.is_none());
    assert_eq!(append, v.append);

    let vote_reject = super::decode(&bytes(VOTE_REJECT)).unwrap();
    assert_eq!(vote_reject.get_msg_type(), MessageType::MsgRequestVoteResponse);
    assert_eq!((vote_reject.to, vote_reject.from, vote_reject.term), (3, 2, 5));
    assert_eq!((vote_reject.reject, vote_reject.commit, vote_reject.commit_term), (true, 6, 4));
    assert_eq!(vote_reject, v.vote_reject);

    let snapshot_message = super::decode(&bytes(SNAPSHOT_MESSAGE)).unwrap();
    assert_eq!(snapshot_message.get_msg_type(), MessageType::MsgSnapshot);
    assert_eq!((snapshot_message.to, snapshot_message.from, snapshot_message.term), (3, 1, 5));
    assert_eq!(snapshot_message.get_snapshot(), &v.snapshot);
    assert_eq!(snapshot_message, v.snapshot_message);
}

#[test]
fn encoded_again_the_bytes_are_the_same_or_differ_only_in_order() {
    let v = values();
    assert_eq!(v.entry.encode_to_vec(), bytes(ENTRY));
    assert_eq!(v.hard_state.encode_to_vec(), bytes(HARD_STATE));
    assert_eq!(v.snapshot.encode_to_vec(), bytes(SNAPSHOT));
    assert_eq!(super::encode(&v.snapshot_message), bytes(SNAPSHOT_MESSAGE));
    // Fields in another order (see the module's documentation), each form decoding to the same value.
    for (value, old, prost) in [
        (v.conf_entry.encode_to_vec(), CONF_ENTRY, CONF_ENTRY_PROST),
        (super::encode(&v.append), APPEND, APPEND_PROST),
        (super::encode(&v.vote_reject), VOTE_REJECT, VOTE_REJECT_PROST),
    ] {
        let (old, prost) = (bytes(old), bytes(prost));
        assert_eq!(value, prost);
        assert_ne!(value, old);
        assert_eq!(value.len(), old.len());
    }
    assert_eq!(Entry::decode(bytes(CONF_ENTRY_PROST).as_slice()).unwrap(), v.conf_entry);
    assert_eq!(super::decode(&bytes(APPEND_PROST)).unwrap(), v.append);
    assert_eq!(super::decode(&bytes(VOTE_REJECT_PROST)).unwrap(), v.vote_reject);
}

/// A root group's snapshot names its three or five voters: written one key per voter, as
/// rust-protobuf wrote them; read packed too, as another protobuf writer may have.
#[test]
fn a_conf_states_lists_are_written_unpacked_and_read_either_way() {
    for (voters, unpacked, packed) in
        [(vec![1, 2, 3], "080108020803", "0a03010203"), (vec![1, 2, 3, 4, 5], "08010802080308040805", "0a050102030405")]
    {
        let conf_state = ConfState::from((voters, Vec::<u64>::new()));
        assert_eq!(conf_state.encode_to_vec(), bytes(unpacked));
        assert_eq!(ConfState::decode(bytes(unpacked).as_slice()).unwrap(), conf_state);
        assert_eq!(ConfState::decode(bytes(packed).as_slice()).unwrap(), conf_state);
    }
    let mut joint = ConfState::from((vec![1, 2, 4], vec![5]));
    joint.voters_outgoing = vec![1, 2, 3];
    joint.learners_next = vec![3];
    joint.auto_leave = true;
    let encoded = joint.encode_to_vec();
    assert_eq!(encoded, bytes("080108020804100518011802180320032801"));
    assert_eq!(ConfState::decode(encoded.as_slice()).unwrap(), joint);
}
