//! Request headers, response framing and the Kafka error code of an engine failure.
//!
//! Header versions (Kafka's rule): a request whose API version is flexible has header v2
//! (client id, then tagged fields), otherwise v1; its response has header v1 (correlation
//! id, then tagged fields) when flexible, otherwise v0. ApiVersions responses always use v0.

use bytes::Bytes;

use crate::error::LogError;
use crate::protocol::error_codes as code;
use crate::protocol::messages::RequestHeader;
use crate::protocol::{Chunk, Message, ProtocolError, Reader, Writer};

/// The error code an engine failure is answered with (as python/logbroker/errors.py).
pub fn error_code_for(e: &LogError) -> i16 {
    match e {
        LogError::CorruptBatch { .. } | LogError::CrcMismatch { .. } => code::CORRUPT_MESSAGE,
        LogError::RecordTooLarge { .. } => code::MESSAGE_TOO_LARGE,
        LogError::InvalidRecord { .. } | LogError::NonContiguousAppend { .. } => code::INVALID_RECORD,
        LogError::OffsetOutOfRange { .. } => code::OFFSET_OUT_OF_RANGE,
        LogError::OutOfOrderSequence { .. } => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
        LogError::InvalidProducerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
        LogError::InvalidTxnState { .. } => code::INVALID_TXN_STATE,
        LogError::CoordinatorFenced { .. } => code::TRANSACTION_COORDINATOR_FENCED,
        LogError::InvalidConfig { .. } => code::INVALID_CONFIG,
        LogError::Io { .. }
        | LogError::TooManyOpenFiles { .. }
        | LogError::CorruptIndex { .. }
        | LogError::Closed { .. } => code::KAFKA_STORAGE_ERROR,
    }
}

/// A decoded request header and where the body starts.
pub struct Header {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// The api key and version of a frame (its first four bytes), if it has them.
pub fn peek_api(frame: &[u8]) -> Option<(i16, i16)> {
    if frame.len() < 4 {
        return None;
    }
    Some((i16::from_be_bytes([frame[0], frame[1]]), i16::from_be_bytes([frame[2], frame[3]])))
}

/// Decodes the request header (v1, or v2 when `flexible`); the reader is left at the body.
pub fn decode_header(r: &mut Reader, flexible: bool) -> Result<Header, ProtocolError> {
    let h = RequestHeader::decode(r, if flexible { 2 } else { 1 })?;
    Ok(Header {
        api_key: h.request_api_key,
        api_version: h.request_api_version,
        correlation_id: h.correlation_id,
        client_id: h.client_id,
    })
}

/// The response frame: size, header (v1 when `version` of `M` is flexible), then the body.
pub fn frame_response<M: Message>(body: &M, version: i16, correlation_id: i32) -> Result<Vec<Chunk>, ProtocolError> {
    let flexible = M::FLEXIBLE_MIN >= 0 && version >= M::FLEXIBLE_MIN;
    let mut w = Writer::new();
    body.encode_versioned(&mut w, version)?;
    let body_len = w.len();
    let head_len = if flexible { 5 } else { 4 };
    let total = i32::try_from(body_len + head_len)
        .map_err(|_| ProtocolError(format!("{} response of {body_len} bytes is too large", M::NAME)))?;
    let mut head = Vec::with_capacity(4 + head_len);
    head.extend_from_slice(&total.to_be_bytes());
    head.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        head.push(0);
    }
    let mut chunks = vec![Chunk::Bytes(Bytes::from(head))];
    chunks.extend(w.into_chunks());
    Ok(chunks)
}
