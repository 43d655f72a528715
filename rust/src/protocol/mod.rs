//! The Kafka protocol codec, generated from the pinned JSON message specs (Kafka 4.1.1, the
//! same files the Python codec is generated from: python/logbroker/protocol/specs/).
//!
//! - `codec`: the wire primitives (`Reader`, `Writer`, `Records`, `ProtocolError`, `Message`);
//! - `messages`: one module per request/response/header, written by
//!   `tools/gen_protocol_rs.py` (checked in; a drift test regenerates and compares);
//! - `error_codes`: Kafka's error codes (consts, `name`, `message`, `retriable`), written by
//!   `tools/gen_errors.py` from the vendored table `specs/errors/errors.json`, the one the
//!   Python `ErrorCode` is generated from too.
//!
//! The broker's data path (Produce, Fetch), the follower fetchers and our client share it.

pub mod codec;
#[rustfmt::skip] // generated (tools/gen_*.py): the generator's layout, checked byte for byte
pub mod error_codes;
#[rustfmt::skip] // generated (tools/gen_*.py): the generator's layout, checked byte for byte
pub mod messages;

pub use codec::{Bytes, Chunk, Message, ProtocolError, Reader, Records, TaggedFields, Uuid, Writer};

#[cfg(test)]
mod error_code_tests {
    use super::error_codes::{self as code, message, name, retriable};

    #[test]
    fn generated_error_codes_follow_kafka() {
        assert_eq!((code::UNKNOWN_SERVER_ERROR, code::NONE, code::NOT_LEADER_OR_FOLLOWER), (-1, 0, 6));
        assert_eq!((code::SHARE_SESSION_LIMIT_REACHED, code::CONTROLLER_ID_NOT_REGISTERED), (133, 136));
        assert_eq!(name(code::UNKNOWN_TOPIC_OR_PARTITION), Some("UNKNOWN_TOPIC_OR_PARTITION"));
        assert_eq!(name(134), Some("GROUP_DELETION_FAILED"));
        assert_eq!(name(137), None);
        assert_eq!(message(code::UNKNOWN_TOPIC_OR_PARTITION), Some("This server does not host this topic-partition."));
        assert_eq!(message(code::NONE), None);
        assert!(retriable(code::NOT_LEADER_OR_FOLLOWER) && retriable(code::KAFKA_STORAGE_ERROR));
        assert!(!retriable(code::TOPIC_AUTHORIZATION_FAILED) && !retriable(code::NONE) && !retriable(-2));
        assert_eq!((-1..=136).filter(|&c| name(c).is_some()).count(), 138);
    }
}
