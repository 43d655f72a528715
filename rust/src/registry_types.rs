//! The Arrow types the registry encoders write (avro_encode.rs, json_encode.rs,
//! proto_encode.rs, framed by registry_encode.rs) and the one reading they share.
use arrow_array::cast::AsArray;
use arrow_array::types::{
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::ArrayRef;
use arrow_schema::{DataType, TimeUnit};

/// The scalar types every registry encoder writes (Avro, JSON, Protobuf).
pub fn is_scalar(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::Date32
            | DataType::Timestamp(_, _)
    )
}

/// A timestamp column's value in microseconds since the epoch, whatever its unit.
pub fn micros(a: &ArrayRef, unit: TimeUnit, row: usize) -> i64 {
    match unit {
        TimeUnit::Second => a.as_primitive::<TimestampSecondType>().value(row).saturating_mul(1_000_000),
        TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(row).saturating_mul(1000),
        TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(row) / 1000,
    }
}
