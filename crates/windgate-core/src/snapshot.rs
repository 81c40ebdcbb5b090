//! Checkpoints: an operator's logical state as versioned, self-describing, checksummed bytes.
//!
//! Every streaming operator writes its state between calls with a [`Writer`] and reads it back with a
//! [`Reader`] (`docs/architecture.md`, "Contracts": checkpoints). The bytes are, in order:
//!
//! | bytes | content |
//! |-------|---------|
//! | 8 | [`MAGIC`] |
//! | 4 | the container's format version ([`FORMAT_VERSION`]), little endian |
//! | 4 | `h`, the header's length, little endian |
//! | `h` | the header: JSON `{"operator", "version", "params", "annotations", "sections": [{"name", "len"}]}` |
//! | ... | each section's bytes, in the header's order: an Arrow IPC stream, or JSON |
//! | 4 | CRC-32 of every byte before it, little endian |
//!
//! `params` are the operator's parameters (its options, as JSON), checked against the restoring operator's:
//! a snapshot restores only into an operator with the same query (runtime settings such as `threads` and
//! `strategy` may differ). `version` is the operator's own state-layout version: a reader keeps reading
//! every version it ever wrote. Nothing is a dump of memory: rows are Arrow IPC (the aggregation's open panes
//! in the partial-state format of [`crate::aggregate::partial`]), scalars are JSON.

use std::collections::BTreeMap;
use std::io::Cursor;

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::SchemaRef;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};

/// The first bytes of every snapshot.
pub const MAGIC: &[u8; 8] = b"WGSNAP\r\n";

/// Version of the container layout (magic, header, sections, checksum).
pub const FORMAT_VERSION: u32 = 1;

/// Most bytes a header may claim (a corrupted length must not allocate gigabytes).
const MAX_HEADER: usize = 64 << 20;

#[derive(Serialize, Deserialize)]
struct Header {
    operator: String,
    version: u32,
    params: Value,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    sections: Vec<SectionEntry>,
}

#[derive(Serialize, Deserialize)]
struct SectionEntry {
    name: String,
    len: u64,
}

fn corrupt(message: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Snapshot,
        format!("data: not a readable windgate snapshot: {message}"),
    )
}

/// Builds a snapshot: the operator's name and parameters, then its sections.
pub struct Writer {
    header: Header,
    body: Vec<u8>,
}

impl Writer {
    /// A snapshot of `operator` (its state-layout `version`) with these parameters.
    pub fn new(operator: &str, version: u32, params: &impl Serialize) -> Result<Self> {
        let params = serde_json::to_value(params)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("snapshot parameters: {e}")))?;
        Ok(Self {
            header: Header {
                operator: operator.to_string(),
                version,
                params,
                annotations: BTreeMap::new(),
                sections: vec![],
            },
            body: vec![],
        })
    }

    /// Free-form strings carried along (the bindings keep their own keyword arguments here).
    pub fn annotate(&mut self, key: &str, value: impl Into<String>) {
        self.header
            .annotations
            .insert(key.to_string(), value.into());
    }

    /// Adds `annotations` (as returned by [`Reader::annotations`]).
    pub fn annotate_all(&mut self, annotations: &BTreeMap<String, String>) {
        for (k, v) in annotations {
            self.annotate(k, v.clone());
        }
    }

    /// Records the section written to the body since `start`.
    fn section(&mut self, name: &str, start: usize) {
        self.header.sections.push(SectionEntry {
            name: name.to_string(),
            len: (self.body.len() - start) as u64,
        });
    }

    /// A section of rows: an Arrow IPC stream with `schema` (its metadata kept), written straight into the
    /// body (a large state is copied once more, at [`Self::finish`], not once per layer).
    pub fn batches(
        &mut self,
        name: &str,
        schema: &SchemaRef,
        batches: &[RecordBatch],
    ) -> Result<()> {
        let start = self.body.len();
        let ipc = |e: arrow_schema::ArrowError| {
            Error::new(
                ErrorKind::Internal,
                format!("snapshot section {name:?}: {e}"),
            )
            .with_source(e)
        };
        let bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
        self.body.reserve(bytes + 1024);
        let mut w = StreamWriter::try_new(&mut self.body, schema).map_err(ipc)?;
        for b in batches {
            w.write(b).map_err(ipc)?;
        }
        w.finish().map_err(ipc)?;
        drop(w);
        self.section(name, start);
        Ok(())
    }

    /// A section of scalars, as JSON.
    pub fn json(&mut self, name: &str, value: &impl Serialize) -> Result<()> {
        let start = self.body.len();
        serde_json::to_writer(&mut self.body, value).map_err(|e| {
            Error::new(
                ErrorKind::Internal,
                format!("snapshot section {name:?}: {e}"),
            )
        })?;
        self.section(name, start);
        Ok(())
    }

    /// The snapshot's bytes.
    pub fn finish(self) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.header)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("snapshot header: {e}")))?;
        let mut out = Vec::with_capacity(20 + header.len() + self.body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.body);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(out)
    }
}

/// Reads a snapshot written by [`Writer`]: checks the magic, the checksum, the versions and the operator.
pub struct Reader<'a> {
    header: Header,
    sections: BTreeMap<String, &'a [u8]>,
}

impl<'a> Reader<'a> {
    /// Opens `data`, a snapshot of `operator` whose state-layout version is at most `max_version`.
    pub fn open(data: &'a [u8], operator: &str, max_version: u32) -> Result<Self> {
        let header = Self::peek_header(data)?;
        if header.operator != operator {
            return Err(Error::new(
                ErrorKind::SnapshotMismatch,
                format!(
                    "data: this is a snapshot of a {} operator, not of a {operator}",
                    header.operator
                ),
            ));
        }
        if header.version > max_version {
            return Err(Error::new(
                ErrorKind::Snapshot,
                format!(
                    "data: the snapshot's {operator} state has version {}; this windgate reads versions \
                     up to {max_version} (restore it with a newer windgate)",
                    header.version
                ),
            ));
        }
        let h = u32::from_le_bytes(data[12..16].try_into().expect("4 bytes")) as usize;
        let mut at = 16 + h;
        let body_end = data.len() - 4;
        let mut sections = BTreeMap::new();
        for s in &header.sections {
            let end = usize::try_from(s.len)
                .ok()
                .and_then(|l| at.checked_add(l))
                .filter(|&e| e <= body_end)
                .ok_or_else(|| corrupt(format!("section {:?} runs past the end", s.name)))?;
            sections.insert(s.name.clone(), &data[at..end]);
            at = end;
        }
        if at != body_end {
            return Err(corrupt("bytes left after the last section"));
        }
        Ok(Self { header, sections })
    }

    /// The operator name and header of `data`, after checking magic, length and checksum.
    fn peek_header(data: &[u8]) -> Result<Header> {
        if data.len() < 20 || &data[..8] != MAGIC {
            return Err(corrupt(if data.len() >= 8 && &data[..8] == MAGIC {
                "truncated".to_string()
            } else {
                format!(
                    "it does not start with the snapshot magic bytes ({} bytes given)",
                    data.len()
                )
            }));
        }
        let body_end = data.len() - 4;
        let stored = u32::from_le_bytes(data[body_end..].try_into().expect("4 bytes"));
        if crc32fast::hash(&data[..body_end]) != stored {
            return Err(corrupt(
                "the checksum does not match (the bytes were truncated or changed)",
            ));
        }
        let version = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(Error::new(
                ErrorKind::Snapshot,
                format!(
                    "data: the snapshot container has version {version}; this windgate reads version \
                     {FORMAT_VERSION}"
                ),
            ));
        }
        let h = u32::from_le_bytes(data[12..16].try_into().expect("4 bytes")) as usize;
        if h > MAX_HEADER || 16 + h > body_end {
            return Err(corrupt("the header runs past the end"));
        }
        serde_json::from_slice(&data[16..16 + h]).map_err(|e| corrupt(format!("header: {e}")))
    }

    /// The state-layout version the operator wrote.
    pub fn version(&self) -> u32 {
        self.header.version
    }

    /// The operator's parameters, as written.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.header.params.clone())
            .map_err(|e| corrupt(format!("parameters: {e}")))
    }

    /// The parameters to restore with: `given` after checking that it equals the snapshot's but for the
    /// `runtime` settings ([`check_params`]), or the snapshot's own.
    pub fn params_or<T: DeserializeOwned + Serialize>(
        &self,
        given: Option<T>,
        runtime: &[&str],
    ) -> Result<T> {
        match given {
            Some(o) => {
                check_params(self.params_json(), &o, runtime)?;
                Ok(o)
            }
            None => self.params(),
        }
    }

    /// The parameters as JSON (for [`check_params`]).
    pub fn params_json(&self) -> &Value {
        &self.header.params
    }

    pub fn annotations(&self) -> &BTreeMap<String, String> {
        &self.header.annotations
    }

    fn raw(&self, name: &str) -> Result<&'a [u8]> {
        self.sections
            .get(name)
            .copied()
            .ok_or_else(|| corrupt(format!("section {name:?} is missing")))
    }

    /// A section of rows: its schema and batches.
    pub fn batches(&self, name: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let bad = |e: arrow_schema::ArrowError| corrupt(format!("section {name:?}: {e}"));
        let reader = StreamReader::try_new(Cursor::new(self.raw(name)?), None).map_err(bad)?;
        let schema = reader.schema();
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(bad)?;
        Ok((schema, batches))
    }

    /// A section of scalars.
    pub fn json<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        serde_json::from_slice(self.raw(name)?)
            .map_err(|e| corrupt(format!("section {name:?}: {e}")))
    }
}

/// The operator name and parameters of a snapshot (after checking it is whole): what the bindings show and
/// compare before restoring.
pub fn describe(data: &[u8]) -> Result<(String, u32, Value, BTreeMap<String, String>)> {
    let h = Reader::peek_header(data)?;
    Ok((h.operator, h.version, h.params, h.annotations))
}

/// Checks that `ours` (the restoring operator's parameters) equal `theirs` (the snapshot's) in every field
/// but the `runtime` ones; the error names the first field that differs and both values.
pub fn check_params(theirs: &Value, ours: &impl Serialize, runtime: &[&str]) -> Result<()> {
    let ours = serde_json::to_value(ours)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("snapshot parameters: {e}")))?;
    let (Value::Object(t), Value::Object(o)) = (theirs, &ours) else {
        return Err(corrupt("the parameters are not an object"));
    };
    for (k, ov) in o {
        if runtime.contains(&k.as_str()) {
            continue;
        }
        let tv = t.get(k).unwrap_or(&Value::Null);
        if tv != ov {
            return Err(Error::new(
                ErrorKind::SnapshotMismatch,
                format!(
                    "{k}: the snapshot was taken with {k}={tv}, this operator has {k}={ov}; a snapshot \
                     restores only into the same query (runtime settings {} may differ)",
                    runtime.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn sample() -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![1, 2, 3]))],
        )
        .unwrap();
        let mut w = Writer::new("test", 1, &serde_json::json!({"size": 10})).unwrap();
        w.batches("rows", &schema, &[batch]).unwrap();
        w.json("scalars", &vec![7u64, 8]).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn round_trip() {
        let data = sample();
        let r = Reader::open(&data, "test", 1).unwrap();
        let (_, batches) = r.batches("rows").unwrap();
        assert_eq!(batches[0].num_rows(), 3);
        assert_eq!(r.json::<Vec<u64>>("scalars").unwrap(), vec![7, 8]);
        assert!(check_params(r.params_json(), &serde_json::json!({"size": 10}), &[]).is_ok());
        let e = check_params(r.params_json(), &serde_json::json!({"size": 20}), &[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SnapshotMismatch);
        assert!(e.message().starts_with("size:"), "{e}");
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_a_named_error() {
        let data = sample();
        for n in 0..data.len() {
            let e = Reader::open(&data[..n], "test", 1).err().expect("refused");
            assert_eq!(e.kind(), ErrorKind::Snapshot, "{e}");
        }
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 0x10;
            assert!(Reader::open(&bad, "test", 1).is_err(), "byte {i}");
        }
    }

    #[test]
    fn other_operator_and_newer_version_are_refused() {
        let data = sample();
        let e = Reader::open(&data, "other", 1).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::SnapshotMismatch);
        let e = Reader::open(&data, "test", 0).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Snapshot);
    }
}
