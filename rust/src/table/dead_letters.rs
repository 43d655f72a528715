//! Dead letters of an Iceberg topic with value columns and `iceberg.invalid.record.action=
//! dlq_table`: a record whose value does not decode by the subject's schemas (not framed, an
//! unknown schema id, a datum that does not fit) keeps its row in the table with a null
//! `value` and a null `value_raw`, and its bytes go to the topic's dead-letter table
//! (`<table>_dlq`, python/logbroker/iceberg/dead_letters.py) as a row of:
//!
//! | column | type | |
//! | --- | --- | --- |
//! | `topic` | string | |
//! | `partition` | int | |
//! | `offset` | long | |
//! | `timestamp` | timestamptz | as the table's `timestamp` |
//! | `key` | binary | the record key |
//! | `value` | binary | the value's bytes, as produced |
//! | `value_schema_id` | int | the id in the value's framing, null when not framed |
//! | `reason` | string | why it did not decode |
//!
//! Rows are cut from a stretch's record batch by index (`arrow_select::take`): the decoders
//! already kept each failed value in `value_raw`, so nothing is decoded twice.
use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{Field, Schema};

/// The columns of a dead-letter row (the table's `value_raw` is its `value`).
const FROM_TABLE: [(&str, &str); 7] = [
    ("topic", "topic"),
    ("partition", "partition"),
    ("offset", "offset"),
    ("timestamp", "timestamp"),
    ("key", "key"),
    ("value", "value_raw"),
    ("value_schema_id", "value_schema_id"),
];

/// Splits `batch` (a stretch of the table's rows) into the rows to write, `value_raw` null
/// throughout, and the dead letters of the rows `failed` names (row, reason), in that order.
pub fn split(batch: &RecordBatch, failed: &[(usize, String)]) -> Result<(RecordBatch, RecordBatch), String> {
    let rows = UInt32Array::from_iter_values(failed.iter().map(|(r, _)| u32::try_from(*r).unwrap_or(u32::MAX)));
    let mut fields = Vec::with_capacity(FROM_TABLE.len() + 1);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(FROM_TABLE.len() + 1);
    for (name, from) in FROM_TABLE {
        let (i, f) = batch
            .schema_ref()
            .column_with_name(from)
            .map(|(i, f)| (i, f.clone()))
            .ok_or_else(|| format!("the table has no {from} column for the dead-letter table's {name}"))?;
        let taken = arrow_select::take::take(batch.column(i), &rows, None).map_err(|e| e.to_string())?;
        fields.push(Field::new(name, f.data_type().clone(), true));
        columns.push(taken);
    }
    fields.push(Field::new("reason", arrow_schema::DataType::Utf8, false));
    columns.push(Arc::new(StringArray::from_iter_values(failed.iter().map(|(_, why)| why.as_str()))));
    let letters =
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| format!("dead letters: {e}"))?;
    let raw = batch.schema_ref().index_of("value_raw").map_err(|e| e.to_string())?;
    let mut kept = batch.columns().to_vec();
    kept[raw] = new_null_array(kept[raw].data_type(), batch.num_rows());
    let kept = RecordBatch::try_new(batch.schema(), kept).map_err(|e| e.to_string())?;
    Ok((kept, letters))
}

/// The dead letters of a commit as one Arrow IPC stream (None: there are none).
pub fn ipc(batches: &[RecordBatch]) -> Result<Option<Vec<u8>>, String> {
    let Some(first) = batches.first() else { return Ok(None) };
    let mut out = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, first.schema_ref()).map_err(|e| e.to_string())?;
    for b in batches {
        w.write(b).map_err(|e| e.to_string())?;
    }
    w.finish().map_err(|e| e.to_string())?;
    drop(w);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BinaryArray, Int32Array, Int64Array};

    #[test]
    fn failed_rows_leave_with_their_reason_and_raw_goes_null() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("topic", arrow_schema::DataType::Utf8, true),
            Field::new("partition", arrow_schema::DataType::Int32, true),
            Field::new("offset", arrow_schema::DataType::Int64, true),
            Field::new("timestamp", arrow_schema::DataType::Int64, true),
            Field::new("key", arrow_schema::DataType::Binary, true),
            Field::new("value_schema_id", arrow_schema::DataType::Int32, true),
            Field::new("value_raw", arrow_schema::DataType::Binary, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["t"; 3])),
                Arc::new(Int32Array::from(vec![2; 3])),
                Arc::new(Int64Array::from(vec![10, 11, 12])),
                Arc::new(Int64Array::from(vec![5, 6, 7])),
                Arc::new(BinaryArray::from_opt_vec(vec![Some(b"a"), None, Some(b"c")])),
                Arc::new(Int32Array::from(vec![Some(1), None, Some(9)])),
                Arc::new(BinaryArray::from_opt_vec(vec![None, Some(b"junk"), Some(b"\0\0\0\0\x09x")])),
            ],
        )
        .unwrap();
        let (kept, dead) = split(&batch, &[(1, "not framed".into()), (2, "schema id 9 is unknown".into())]).unwrap();
        assert_eq!(kept.num_rows(), 3);
        assert_eq!(kept.column_by_name("value_raw").unwrap().null_count(), 3);
        assert_eq!(kept.column_by_name("offset").unwrap().as_ref(), batch.column(2).as_ref());
        let col = |n: &str| dead.column_by_name(n).unwrap().clone();
        assert_eq!(col("offset").as_any().downcast_ref::<Int64Array>().unwrap().values(), &[11, 12]);
        let values = col("value");
        let values = values.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!((values.value(0), values.value(1)), (&b"junk"[..], &b"\0\0\0\0\x09x"[..]));
        let ids = col("value_schema_id");
        assert!(ids.is_null(0) && ids.as_any().downcast_ref::<Int32Array>().unwrap().value(1) == 9);
        let why = col("reason");
        assert_eq!(why.as_any().downcast_ref::<StringArray>().unwrap().value(0), "not framed");
        assert!(ipc(&[dead]).unwrap().is_some());
        assert!(ipc(&[]).unwrap().is_none());
    }
}
