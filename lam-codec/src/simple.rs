//! The three fixed-rate codecs: F16, Int8PerVector, SignBinary.

use crate::Error;
use crate::format::{self, CodecId, Header, SzpMode};
use half::f16;
use half::slice::HalfFloatSliceExt;

fn header(codec: CodecId, rows: usize, dim: usize, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    Header { version: format::VERSION, codec, mode: SzpMode::Fixed, rows: rows as u64, dim: dim as u64, bound_abs: 0.0, step: 0.0, body_len: 0 }.write(out);
    start
}

fn check_finite(values: &[f32]) -> Result<(), Error> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(Error::NonFinite { index, value: values[index] }),
        None => Ok(()),
    }
}

/// Checked body of the expected length for `codec`; `per_row` bytes a row
/// (or `per_value` for F16) bound the output to the stream's own length.
fn body(bytes: &[u8], codec: CodecId) -> Result<(Header, &[u8], usize), Error> {
    let (h, body) = format::check_stream(bytes)?;
    if h.codec != codec {
        return Err(Error::WrongCodec { expected: codec.name(), found: h.codec.name() });
    }
    let n = h.values()?;
    Ok((h, body, n))
}

/// F16: every value rounded to the nearest IEEE half (ties to even).
/// Error: `|x - x_hat| <= 2^-11 * |x|` for |x| >= 2^-14, `<= 2^-25` below.
/// Values above 65504 in magnitude (after rounding) are refused.
pub fn encode_f16(values: &[f32], rows: usize, dim: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    crate::check_shape(values, rows, dim)?;
    check_finite(values)?;
    let start = header(CodecId::F16, rows, dim, out);
    out.reserve(values.len() * 2 + format::TRAILER_LEN);
    // Slice conversion uses F16C where the CPU has it (same rounding as from_f32).
    let mut h = vec![f16::ZERO; values.len()];
    h.convert_from_f32_slice(values);
    if let Some(index) = h.iter().position(|x| x.is_infinite()) {
        out.truncate(start);
        return Err(Error::OutOfRange { codec: "f16", index, value: values[index] });
    }
    out.extend(h.iter().flat_map(|x| x.to_le_bytes()));
    format::finish(out, start);
    Ok(())
}

/// Decode an F16 stream.
pub fn decode_f16(bytes: &[u8], out: &mut Vec<f32>) -> Result<Header, Error> {
    let (h, body, n) = body(bytes, CodecId::F16)?;
    if Some(body.len()) != n.checked_mul(2) {
        return Err(Error::corrupt(format!("f16 body is {} bytes for {n} values", body.len())));
    }
    let halves: Vec<f16> = body.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]])).collect();
    let start = out.len();
    out.resize(start + n, 0.0);
    halves.convert_to_f32_slice(&mut out[start..]);
    Ok(h)
}

/// Int8PerVector: per row, `scale = max|x| / 127` (f32) then
/// `q = round(x / scale)` clamped to [-127, 127]; decoded as `q * scale`.
/// Error: `|x - x_hat| <= scale / 2` up to f32 rounding (tests use `0.5001 * scale`).
pub fn encode_int8(values: &[f32], rows: usize, dim: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    crate::check_shape(values, rows, dim)?;
    check_finite(values)?;
    let start = header(CodecId::Int8PerVector, rows, dim, out);
    out.reserve(rows * (4 + dim) + format::TRAILER_LEN);
    if dim > 0 {
        for row in values.chunks_exact(dim) {
            let max_abs = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = max_abs / 127.0;
            out.extend_from_slice(&scale.to_le_bytes());
            if scale > 0.0 {
                out.extend(row.iter().map(|&x| ((x / scale).round().clamp(-127.0, 127.0) as i8) as u8));
            } else {
                out.extend(std::iter::repeat_n(0u8, dim));
            }
        }
    }
    format::finish(out, start);
    Ok(())
}

/// Decode an Int8PerVector stream.
pub fn decode_int8(bytes: &[u8], out: &mut Vec<f32>) -> Result<Header, Error> {
    let (h, body, n) = body(bytes, CodecId::Int8PerVector)?;
    let rows = h.rows as usize;
    let dim = h.dim as usize;
    let want = if dim == 0 { Some(0) } else { rows.checked_mul(4).and_then(|r| r.checked_add(n)) };
    if want != Some(body.len()) {
        return Err(Error::corrupt(format!("int8 body is {} bytes for {rows}x{dim}", body.len())));
    }
    out.reserve(n);
    for r in body.chunks_exact(4 + dim).take(if dim == 0 { 0 } else { rows }) {
        let scale = f32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        if !(scale.is_finite() && scale >= 0.0) {
            return Err(Error::corrupt(format!("int8 scale {scale}")));
        }
        out.extend(r[4..].iter().map(|&b| (b as i8) as f32 * scale));
    }
    Ok(h)
}

/// SignBinary: per row, the L2 norm (f32, computed in f64) and one bit per
/// coordinate (set when `x < 0`, LSB first); decoded as `+-norm / sqrt(dim)`.
/// The decoded row has the input's norm (to f32 rounding) and its signs
/// (zeros decode as positive).
pub fn encode_binary(values: &[f32], rows: usize, dim: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    crate::check_shape(values, rows, dim)?;
    check_finite(values)?;
    let start = header(CodecId::SignBinary, rows, dim, out);
    let nb = dim.div_ceil(8);
    out.reserve(rows * (4 + nb) + format::TRAILER_LEN);
    if dim > 0 {
        for row in values.chunks_exact(dim) {
            let norm = row.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt() as f32;
            if !norm.is_finite() {
                out.truncate(start);
                return Err(Error::OutOfRange { codec: "binary", index: 0, value: norm });
            }
            out.extend_from_slice(&norm.to_le_bytes());
            for c in row.chunks(8) {
                let mut b = 0u8;
                for (i, &v) in c.iter().enumerate() {
                    b |= ((v < 0.0) as u8) << i;
                }
                out.push(b);
            }
        }
    }
    format::finish(out, start);
    Ok(())
}

/// Decode a SignBinary stream.
pub fn decode_binary(bytes: &[u8], out: &mut Vec<f32>) -> Result<Header, Error> {
    let (h, body, n) = body(bytes, CodecId::SignBinary)?;
    let rows = h.rows as usize;
    let dim = h.dim as usize;
    let nb = dim.div_ceil(8);
    let want = nb.checked_add(4).and_then(|p| p.checked_mul(rows));
    if dim > 0 && want != Some(body.len()) || dim == 0 && !body.is_empty() {
        return Err(Error::corrupt(format!("binary body is {} bytes for {rows}x{dim}", body.len())));
    }
    out.reserve(n);
    if dim == 0 {
        return Ok(h);
    }
    let inv_sqrt = 1.0 / (dim as f64).sqrt();
    for r in body.chunks_exact(4 + nb) {
        let norm = f32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        if !(norm.is_finite() && norm >= 0.0) {
            return Err(Error::corrupt(format!("binary norm {norm}")));
        }
        if !dim.is_multiple_of(8) && r[4 + nb - 1] >> (dim % 8) != 0 {
            return Err(Error::corrupt("binary padding bits are not 0"));
        }
        let a = (norm as f64 * inv_sqrt) as f32;
        for (k, &byte) in r[4..].iter().enumerate() {
            let m = (dim - 8 * k).min(8);
            out.extend((0..m).map(|i| f32::from_bits(a.to_bits() | (((byte >> i) & 1) as u32) << 31)));
        }
    }
    Ok(h)
}
