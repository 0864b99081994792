//! reference_parse FILE [WARM_ROUNDS]: the first parse of FILE's safetensors header in a new process,
//! done as the reference crate (v0.6.2) does it (shared/reference/safetensors.md §1.2-1.5): the UTF-8
//! check, serde_json into a `#[serde(flatten)]` HashMap of entries, the sort by offsets, the name
//! index, `validate` twice, the whole-buffer check. An analog written from those rules, not the crate
//! (Debian has no safetensors crate and the build may not fetch one). The header bytes are read into
//! memory before the clock starts, as bench_fresh_parse does; the data (sparse in the benchmark files)
//! counts only by its length. Then WARM_ROUNDS more parses in the same process. Prints
//! "first_ms=… tensors=… warm_median_ms=…" like bench_fresh_parse.
use serde::Deserialize;
use std::collections::HashMap;
use std::io::Read;
use std::time::Instant;

#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[derive(Debug, Clone, Copy, Deserialize)]
enum Dtype {
    BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
    I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64,
}

impl Dtype {
    fn bits(self) -> usize {
        use Dtype::*;
        match self {
            F4 => 4,
            F6_E2M3 | F6_E3M2 => 6,
            BOOL | U8 | I8 | F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ => 8,
            I16 | U16 | F16 | BF16 => 16,
            I32 | U32 | F32 => 32,
            C64 | F64 | I64 | U64 => 64,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
struct TensorInfo {
    dtype: Dtype,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

#[derive(Deserialize)]
struct HashMetadata {
    #[serde(rename = "__metadata__")]
    metadata: Option<HashMap<String, String>>,
    #[serde(flatten)]
    tensors: HashMap<String, TensorInfo>,
}

struct Metadata {
    #[allow(dead_code)]
    metadata: Option<HashMap<String, String>>,
    tensors: Vec<TensorInfo>,
    index_map: HashMap<String, usize>,
}

impl Metadata {
    fn new(metadata: Option<HashMap<String, String>>, tensors: HashMap<String, TensorInfo>) -> Result<Self, String> {
        let mut sorted: Vec<(String, TensorInfo)> = tensors.into_iter().collect();
        sorted.sort_by(|(_, l), (_, r)| l.data_offsets.cmp(&r.data_offsets));
        let mut index_map = HashMap::with_capacity(sorted.len());
        let tensors = sorted
            .into_iter()
            .enumerate()
            .map(|(i, (name, info))| {
                index_map.insert(name, i);
                info
            })
            .collect();
        let m = Metadata { metadata, tensors, index_map };
        m.validate()?;
        Ok(m)
    }

    fn validate(&self) -> Result<usize, String> {
        let mut start = 0usize;
        for (i, info) in self.tensors.iter().enumerate() {
            let (s, e) = info.data_offsets;
            if s != start || e < s {
                let name = self.index_map.iter().find(|(_, &j)| j == i).map(|(n, _)| n.as_str()).unwrap_or("no_tensor");
                return Err(format!("InvalidOffset({name})"));
            }
            start = e;
            let n = info.shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or("ValidationOverflow")?;
            let bits = n.checked_mul(info.dtype.bits()).ok_or("ValidationOverflow")?;
            if bits % 8 != 0 {
                return Err("MisalignedSlice".into());
            }
            if e - s != bits / 8 {
                return Err("TensorInvalidInfo".into());
            }
        }
        Ok(start)
    }
}

// `buffer` holds the length prefix and the header; `len` is the whole file's length (the data, left
// sparse in the benchmark files, is never read: the reference only compares its length).
fn deserialize(buffer: &[u8], len: usize) -> Result<usize, String> {
    if len < 8 || buffer.len() < 8 {
        return Err("HeaderTooSmall".into());
    }
    let n = u64::from_le_bytes(buffer[..8].try_into().unwrap()) as usize;
    if n > 100_000_000 {
        return Err("HeaderTooLarge".into());
    }
    let stop = n.checked_add(8).ok_or("InvalidHeaderLength")?;
    if stop > len || stop > buffer.len() {
        return Err("InvalidHeaderLength".into());
    }
    let text = std::str::from_utf8(&buffer[8..stop]).map_err(|e| format!("InvalidHeader({e})"))?;
    let parsed: HashMetadata = serde_json::from_str(text).map_err(|e| format!("InvalidHeaderDeserialization({e})"))?;
    let metadata = Metadata::new(parsed.metadata, parsed.tensors)?;
    let end = metadata.validate()?;
    if end + 8 + n != len {
        return Err("MetadataIncompleteBuffer".into());
    }
    Ok(metadata.tensors.len())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: reference_parse FILE [WARM_ROUNDS]");
        std::process::exit(2);
    }
    let warm_rounds: usize = args.get(2).and_then(|k| k.parse().ok()).unwrap_or(0);
    let mut file = std::fs::File::open(&args[1]).expect("open");
    let len = file.metadata().expect("stat").len() as usize;
    let mut prefix = [0u8; 8];
    file.read_exact(&mut prefix).expect("read");
    let n = (u64::from_le_bytes(prefix) as usize).min(len.saturating_sub(8));
    let mut bytes = vec![0u8; 8 + n];
    bytes[..8].copy_from_slice(&prefix);
    file.read_exact(&mut bytes[8..]).expect("read");

    let timed = || {
        let t0 = Instant::now();
        let result = deserialize(&bytes, len);
        (t0.elapsed().as_secs_f64() * 1e3, result)
    };
    let (first, result) = timed();
    let count = result.unwrap_or_else(|e| {
        eprintln!("reference_parse: {e}");
        std::process::exit(1);
    });
    let mut warm: Vec<f64> = (0..warm_rounds).map(|_| timed().0).collect();
    warm.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = if warm.is_empty() { 0.0 } else { warm[warm.len() / 2] };
    println!("first_ms={first:.3} tensors={count} warm_median_ms={median:.3}");
}
