//! The Kafka protocol codec, generated from the pinned JSON message specs (Kafka 4.1.1, the
//! same files the Python codec is generated from: python/logbroker/protocol/specs/).
//!
//! - `codec`: the wire primitives (`Reader`, `Writer`, `Records`, `ProtocolError`, `Message`);
//! - `messages`: one module per request/response/header, written by
//!   `tools/gen_protocol_rs.py` (checked in; a drift test regenerates and compares).
//!
//! The broker's data path (Produce, Fetch), the follower fetchers and our client share it.

pub mod codec;
pub mod messages;

pub use codec::{Bytes, Chunk, Message, ProtocolError, Reader, Records, TaggedFields, Uuid, Writer};
