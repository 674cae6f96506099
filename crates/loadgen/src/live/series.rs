//! The live series as Prometheus remote write carries them: [`TimeSeries`] and a
//! push's body (`prometheus.WriteRequest`, protobuf encoded by hand, snappy block
//! compressed).

/// One series: its labels (sorted by name, `__name__` first) and samples
/// `(value, timestamp in ms since the Unix epoch)`, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    /// `(name, value)` pairs.
    pub labels: Vec<(String, String)>,
    /// `(value, t_unix_ms)` pairs.
    pub samples: Vec<(f64, i64)>,
}

/// The body of a push: a `prometheus.WriteRequest` holding `series`, snappy block
/// compressed. Labels are written sorted by name (the protocol requires it;
/// `__name__` sorts before lower-case names).
///
/// ```text
/// WriteRequest { repeated TimeSeries timeseries = 1; }
/// TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
/// Label        { string name = 1; string value = 2; }
/// Sample       { double value = 1; int64 timestamp = 2; }
/// ```
pub fn encode(series: &[TimeSeries]) -> Vec<u8> {
    let mut req = Vec::new();
    let mut ts = Vec::new();
    let mut msg = Vec::new();
    for s in series {
        ts.clear();
        let mut labels: Vec<&(String, String)> = s.labels.iter().collect();
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, value) in labels {
            msg.clear();
            bytes_field(&mut msg, 1, name.as_bytes());
            bytes_field(&mut msg, 2, value.as_bytes());
            bytes_field(&mut ts, 1, &msg);
        }
        for &(value, t_ms) in &s.samples {
            msg.clear();
            msg.push(1 << 3 | 1); // field 1, 64-bit
            msg.extend_from_slice(&value.to_le_bytes());
            msg.push(2 << 3); // field 2, varint
            varint(&mut msg, t_ms as u64); // int64: two's complement
            bytes_field(&mut ts, 2, &msg);
        }
        bytes_field(&mut req, 1, &ts);
    }
    // Compressing a buffer in memory fails only past snappy's 4 GiB input limit.
    snap::raw::Encoder::new()
        .compress_vec(&req)
        .expect("a remote-write body under 4 GiB")
}

/// A length-delimited field (wire type 2).
fn bytes_field(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    out.push(field << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
