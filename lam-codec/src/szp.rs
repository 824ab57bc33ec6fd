//! Szp: the error-bounded block codec (after cuSZp, Huang et al., SC'23),
//! CPU reference implementation.
//!
//! Values are read as one flat 1-D array, cut into blocks of [`BLOCK`]
//! values. Each value is quantised to `q = rint(x * (1/step))` in f64, so the
//! reconstruction `(q * step) as f32` lies within the bound (see
//! [`resolve_bound`] for the margin that makes this hold in floating point).
//! In plain mode each block codes `q[0], q[1]-q[0], ...` (1-D Lorenzo inside
//! the block, so blocks stay independent); in fixed mode it codes `q` itself.
//! A block whose coded values are all 0 takes no payload; otherwise it stores
//! a 32-bit sign word and `w` 32-bit magnitude bit planes, `w` being the bit
//! length of its largest |coded value| (the block's own width, 0..=31).

use crate::Error;
use crate::format::{self, CodecId, HEADER_LEN, Header, SzpMode};
use rayon::prelude::*;

/// Values per block.
pub const BLOCK: usize = 32;
/// Blocks per group; the stream stores one payload offset per group.
pub const GROUP_BLOCKS: usize = 1024;
/// Bits per packed block width.
pub const WIDTH_BITS: usize = 5;
/// Largest |x / step| accepted, so coded values (Lorenzo differences
/// included) fit in 31 magnitude bits.
pub const MAX_QUANT: f64 = (1u64 << 29) as f64;

/// An error bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Absolute: every decoded value within this distance of its input.
    Abs(f64),
    /// Relative: `rel * (max - min)` over the batch (cuSZp's definition),
    /// resolved in f64.
    Rel(f64),
}

/// A bound resolved for one batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    /// The absolute bound promised (what the caller asked for, resolved).
    pub bound_abs: f64,
    /// Quantisation step written in the stream (slightly under `2 * bound_abs`).
    pub step: f64,
    /// `1 / step`, the multiplier used to quantise.
    pub inv_step: f64,
    /// Smallest value of the batch.
    pub min: f64,
    /// Largest value of the batch.
    pub max: f64,
    /// Largest |value| of the batch.
    pub max_abs: f64,
}

/// Min, max and first non-finite index of `values`, in one vectorisable pass.
pub(crate) fn scan(values: &[f32]) -> Result<(f32, f32), Error> {
    const L: usize = 16;
    let mut mn = [f32::INFINITY; L];
    let mut mx = [f32::NEG_INFINITY; L];
    let mut bad = [0u32; L];
    let mut chunks = values.chunks_exact(L);
    for c in &mut chunks {
        for j in 0..L {
            let v = c[j];
            mn[j] = if v < mn[j] { v } else { mn[j] };
            mx[j] = if v > mx[j] { v } else { mx[j] };
            bad[j] |= ((v.to_bits() & 0x7f80_0000) == 0x7f80_0000) as u32;
        }
    }
    let mut any_bad = bad.iter().any(|&b| b != 0);
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for j in 0..L {
        lo = lo.min(mn[j]);
        hi = hi.max(mx[j]);
    }
    for &v in chunks.remainder() {
        any_bad |= !v.is_finite();
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if any_bad {
        let index = values.iter().position(|v| !v.is_finite()).unwrap_or(0);
        return Err(Error::NonFinite { index, value: values[index] });
    }
    Ok((lo, hi))
}

/// Resolve `bound` for `values` and choose the quantisation step.
///
/// `bound_abs` is `a` for `Abs(a)` and `r * (max - min)` for `Rel(r)`. The
/// step is `2 * (bound_abs - margin)` with
/// `margin = (max_abs + bound_abs) * (2^-24 + 2^-48) + 2^-149`, which covers
/// the f32 rounding of the reconstruction and the f64 rounding of the
/// quantisation, so `|x - x_hat| <= bound_abs` holds exactly, not just in
/// real arithmetic. A constant batch with a zero bound is coded exactly
/// (step `|c|`). Errors when the bound leaves no room for the margin or
/// needs more than 30 bits per value.
pub fn resolve_bound(values: &[f32], bound: Bound) -> Result<Resolved, Error> {
    let (lo, hi) = if values.is_empty() { (0.0, 0.0) } else { scan(values)? };
    let (min, max) = (lo as f64, hi as f64);
    let max_abs = min.abs().max(max.abs());
    let bound_abs = match bound {
        Bound::Abs(a) => {
            if !(a.is_finite() && a >= 0.0) {
                return Err(Error::InvalidBound(format!("absolute bound {a} must be finite and >= 0")));
            }
            a
        }
        Bound::Rel(r) => {
            if !(r.is_finite() && r >= 0.0) {
                return Err(Error::InvalidBound(format!("relative bound {r} must be finite and >= 0")));
            }
            r * (max - min)
        }
    };
    if bound_abs > 1e30 {
        return Err(Error::InvalidBound(format!("bound {bound_abs:e} is larger than any f32 data needs")));
    }
    let exact = |step: f64| Resolved { bound_abs, step, inv_step: 1.0 / step, min, max, max_abs };
    if values.is_empty() {
        return Ok(exact(1.0));
    }
    if min == max && bound_abs == 0.0 {
        // q = rint(c / |c|) = +-1 and (q * |c|) as f32 == c exactly.
        return Ok(exact(if max_abs > 0.0 { max_abs } else { 1.0 }));
    }
    let margin = (max_abs + bound_abs) * (f64::powi(2.0, -24) + f64::powi(2.0, -48)) + f64::powi(2.0, -149);
    let eff = bound_abs - margin;
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN must fail too
    if !(eff > 0.0) {
        return Err(Error::BoundTooSmall { bound: bound_abs, max_abs, why: "below the f32 rounding of the values" });
    }
    let step = 2.0 * eff;
    if max_abs / step > MAX_QUANT {
        return Err(Error::BoundTooSmall { bound: bound_abs, max_abs, why: "needs more than 30 bits per value" });
    }
    Ok(exact(step))
}

/// Quantise one value. `rint` in f64 written as the add/subtract of
/// 1.5 * 2^52 (exact round-half-even for |v| < 2^51, SSE2-vectorisable);
/// the CUDA/HIP kernel uses `rint`, which gives the same integer.
#[inline(always)]
pub(crate) fn quant(x: f32, inv: f64) -> i32 {
    const MAGIC: f64 = 6_755_399_441_055_744.0;
    let v = x as f64 * inv;
    ((v + MAGIC) - MAGIC) as i32
}

/// Reconstruct one value: `(q * step) as f32`, in f64 (as the kernel does).
#[inline(always)]
pub(crate) fn dequant(q: i32, step: f64) -> f32 {
    (q as f64 * step) as f32
}

/// Bytes a block of width `w` takes in the payload.
#[inline(always)]
pub fn block_bytes(w: u8) -> usize {
    if w == 0 { 0 } else { 4 * (1 + w as usize) }
}

/// Coded values of one block (`x.len() <= BLOCK`; missing values code as 0).
#[inline(always)]
fn coded(x: &[f32], inv: f64, plain: bool) -> [i32; BLOCK] {
    let mut v = [0i32; BLOCK];
    if x.len() == BLOCK {
        for i in 0..BLOCK {
            v[i] = quant(x[i], inv);
        }
    } else {
        for (i, &xi) in x.iter().enumerate() {
            v[i] = quant(xi, inv);
        }
    }
    if plain {
        let mut prev = 0i32;
        for vi in v.iter_mut().take(x.len()) {
            let q = *vi;
            *vi = q.wrapping_sub(prev);
            prev = q;
        }
    }
    v
}

/// Encode one block, appending its payload; returns its width.
#[inline(always)]
pub(crate) fn encode_block(x: &[f32], inv: f64, plain: bool, out: &mut Vec<u8>) -> u8 {
    let v = coded(x, inv, plain);
    let mut mags = [0u32; BLOCK];
    let mut or = 0u32;
    for i in 0..BLOCK {
        mags[i] = v[i].unsigned_abs();
        or |= mags[i];
    }
    let w = (32 - or.leading_zeros()) as u8;
    if w == 0 {
        return 0;
    }
    let mut signs = 0u32;
    for (i, &vi) in v.iter().enumerate() {
        signs |= ((vi as u32) >> 31) << i;
    }
    out.extend_from_slice(&signs.to_le_bytes());
    planes::pack(&mags, w, out);
    w
}

/// Decode one block's payload `p` (exactly `block_bytes(w)` bytes) into `out`
/// (`out.len() <= BLOCK`).
#[inline(always)]
pub(crate) fn decode_block(p: &[u8], w: u8, step: f64, plain: bool, out: &mut [f32]) {
    if w == 0 {
        out.fill(dequant(0, step));
        return;
    }
    let signs = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
    let mut mags = [0u32; BLOCK];
    planes::unpack(&p[4..], w, &mut mags);
    // Separate passes so the sign and dequantisation loops vectorise; only
    // the Lorenzo prefix sum is serial.
    let mut q = [0i32; BLOCK];
    for i in 0..BLOCK {
        let neg = ((signs & (1u32 << i)) != 0) as i32;
        q[i] = ((mags[i] as i32) ^ neg.wrapping_neg()).wrapping_add(neg);
    }
    if plain {
        for i in 1..BLOCK {
            q[i] = q[i].wrapping_add(q[i - 1]);
        }
    }
    for (o, &qi) in out.iter_mut().zip(&q) {
        *o = dequant(qi, step);
    }
}

mod planes {
    use super::BLOCK;

    /// Append `w` bit planes of `mags`, least significant first: plane `j` is a
    /// little-endian u32 whose bit `i` is bit `j` of `mags[i]`.
    #[inline(always)]
    pub(super) fn pack(mags: &[u32; BLOCK], w: u8, out: &mut Vec<u8>) {
        #[cfg(target_arch = "x86_64")]
        {
            // SSE2 is part of x86_64: byte k of each magnitude holds planes
            // 8k..8k+7; a 64-bit lane shifted left by 7-j puts bit j of every
            // byte in that byte's top bit, which movemask gathers.
            use std::arch::x86_64::*;
            let mut j = 0u8;
            let mut k = 0;
            while j < w {
                let mut bytes = [0u8; BLOCK];
                for i in 0..BLOCK {
                    bytes[i] = (mags[i] >> (8 * k)) as u8;
                }
                // SAFETY: SSE2 is always available on x86_64; loads are unaligned loads of 16 owned bytes.
                unsafe {
                    let lo = _mm_loadu_si128(bytes.as_ptr() as *const __m128i);
                    let hi = _mm_loadu_si128(bytes.as_ptr().add(16) as *const __m128i);
                    let top = (w - j).min(8);
                    for b in 0..top {
                        let s = _mm_cvtsi32_si128(7 - b as i32);
                        let ml = _mm_movemask_epi8(_mm_sll_epi64(lo, s)) as u32;
                        let mh = _mm_movemask_epi8(_mm_sll_epi64(hi, s)) as u32;
                        out.extend_from_slice(&(ml | (mh << 16)).to_le_bytes());
                    }
                }
                j += 8;
                k += 1;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        for j in 0..w {
            let mut plane = 0u32;
            for (i, &m) in mags.iter().enumerate() {
                plane |= ((m >> j) & 1) << i;
            }
            out.extend_from_slice(&plane.to_le_bytes());
        }
    }

    /// Inverse of [`pack`]: `p` holds `w` planes of 4 bytes.
    #[inline(always)]
    pub(super) fn unpack(p: &[u8], w: u8, mags: &mut [u32; BLOCK]) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            // SAFETY: SSE2 is always available on x86_64; stores go to the owned 32-lane array.
            unsafe {
                let mut acc = [_mm_setzero_si128(); 8];
                let lane = |g: i32| _mm_setr_epi32(1 << (4 * g), 1 << (4 * g + 1), 1 << (4 * g + 2), 1 << (4 * g + 3));
                let masks = [lane(0), lane(1), lane(2), lane(3), lane(4), lane(5), lane(6), lane(7)];
                for j in 0..w as usize {
                    let plane = u32::from_le_bytes([p[4 * j], p[4 * j + 1], p[4 * j + 2], p[4 * j + 3]]);
                    let v = _mm_set1_epi32(plane as i32);
                    let bit = _mm_set1_epi32((1u32 << j) as i32);
                    for g in 0..8 {
                        let hit = _mm_cmpeq_epi32(_mm_and_si128(v, masks[g]), masks[g]);
                        acc[g] = _mm_or_si128(acc[g], _mm_and_si128(hit, bit));
                    }
                }
                for (g, a) in acc.iter().enumerate() {
                    _mm_storeu_si128(mags.as_mut_ptr().add(4 * g) as *mut __m128i, *a);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        for j in 0..w as usize {
            let plane = u32::from_le_bytes([p[4 * j], p[4 * j + 1], p[4 * j + 2], p[4 * j + 3]]);
            // `plane & (1 << i)` against a constant mask vectorises on SSE2
            // (no per-lane variable shift needed).
            for (i, m) in mags.iter_mut().enumerate() {
                *m |= (((plane & (1u32 << i)) != 0) as u32) << j;
            }
        }
    }
}

/// Layout of an Szp body for `n` values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub nblocks: usize,
    pub ngroups: usize,
    pub widths_len: usize,
}

impl Layout {
    pub fn new(n: usize) -> Option<Layout> {
        let nblocks = n.div_ceil(BLOCK);
        let ngroups = nblocks.div_ceil(GROUP_BLOCKS);
        let widths_len = nblocks.checked_mul(WIDTH_BITS)?.div_ceil(8);
        Some(Layout { nblocks, ngroups, widths_len })
    }
    /// Bytes before the payload.
    pub fn prefix_len(&self) -> Option<usize> {
        self.ngroups.checked_mul(8)?.checked_add(self.widths_len)
    }
}

/// Payload offset of every block and the payload length.
#[allow(dead_code)]
pub(crate) fn block_offsets(widths: &[u8]) -> (Vec<u64>, u64) {
    let mut off = 0u64;
    let offsets = widths
        .iter()
        .map(|&w| {
            let o = off;
            off += block_bytes(w) as u64;
            o
        })
        .collect();
    (offsets, off)
}

/// Pack widths `WIDTH_BITS` bits each, LSB first.
pub(crate) fn pack_widths(widths: &[u8], out: &mut Vec<u8>) {
    let mut acc = 0u64;
    let mut nbits = 0;
    for &w in widths {
        acc |= (w as u64) << nbits;
        nbits += WIDTH_BITS;
        while nbits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            nbits -= 8;
        }
    }
    if nbits > 0 {
        out.push(acc as u8);
    }
}

/// Width of block `b` from packed widths.
#[inline]
pub(crate) fn width_at(packed: &[u8], b: usize) -> u8 {
    let bit = b * WIDTH_BITS;
    let (byte, sh) = (bit / 8, bit % 8);
    let lo = packed[byte] as u16;
    let hi = if sh + WIDTH_BITS > 8 { packed[byte + 1] as u16 } else { 0 };
    (((lo | (hi << 8)) >> sh) & ((1 << WIDTH_BITS) - 1)) as u8
}

/// Write the header and body prefix (widths, group offsets) and the payload
/// parts, then finish the stream. Shared by the CPU and GPU encoders.
pub(crate) fn assemble(out: &mut Vec<u8>, rows: usize, dim: usize, mode: SzpMode, r: &Resolved, widths: &[u8], payload_parts: &[&[u8]]) {
    let start = out.len();
    Header { version: format::VERSION, codec: CodecId::Szp, mode, rows: rows as u64, dim: dim as u64, bound_abs: r.bound_abs, step: r.step, body_len: 0 }
        .write(out);
    pack_widths(widths, out);
    let mut off = 0u64;
    for g in widths.chunks(GROUP_BLOCKS) {
        out.extend_from_slice(&off.to_le_bytes());
        off += g.iter().map(|&w| block_bytes(w) as u64).sum::<u64>();
    }
    let total: usize = payload_parts.iter().map(|p| p.len()).sum();
    out.reserve(total + format::TRAILER_LEN);
    for p in payload_parts {
        out.extend_from_slice(p);
    }
    format::finish(out, start);
}

/// Encode `values` (`rows * dim`) with Szp on the CPU, appending the stream to `out`.
pub fn encode(values: &[f32], rows: usize, dim: usize, mode: SzpMode, bound: Bound, out: &mut Vec<u8>) -> Result<Resolved, Error> {
    crate::check_shape(values, rows, dim)?;
    let r = resolve_bound(values, bound)?;
    let plain = mode == SzpMode::Plain;
    let inv = r.inv_step;
    let parts: Vec<(Vec<u8>, Vec<u8>)> = values.par_chunks(GROUP_BLOCKS * BLOCK).map(|g| encode_group(g, inv, plain)).collect();
    let widths: Vec<u8> = parts.iter().flat_map(|p| p.0.iter().copied()).collect();
    let payloads: Vec<&[u8]> = parts.iter().map(|p| p.1.as_slice()).collect();
    assemble(out, rows, dim, mode, &r, &widths, &payloads);
    Ok(r)
}

#[inline(always)]
fn encode_group_body(g: &[f32], inv: f64, plain: bool) -> (Vec<u8>, Vec<u8>) {
    let mut widths = Vec::with_capacity(GROUP_BLOCKS);
    let mut payload = Vec::with_capacity(g.len() * 2);
    for b in g.chunks(BLOCK) {
        widths.push(encode_block(b, inv, plain, &mut payload));
    }
    (widths, payload)
}

/// The same code compiled for AVX2 (wider quantisation, per-lane shifts);
/// every operation is exact IEEE or integer, so the bytes never depend on
/// which version runs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn encode_group_avx2(g: &[f32], inv: f64, plain: bool) -> (Vec<u8>, Vec<u8>) {
    encode_group_body(g, inv, plain)
}

fn encode_group(g: &[f32], inv: f64, plain: bool) -> (Vec<u8>, Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected on this CPU.
        return unsafe { encode_group_avx2(g, inv, plain) };
    }
    encode_group_body(g, inv, plain)
}

#[inline(always)]
fn decode_group_body(widths: &[u8], first_block: usize, mut off: usize, payload: &[u8], step: f64, plain: bool, dst: &mut [f32]) {
    for (k, d) in dst.chunks_mut(BLOCK).enumerate() {
        let w = width_at(widths, first_block + k);
        let len = block_bytes(w);
        decode_block(&payload[off..off + len], w, step, plain, d);
        off += len;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn decode_group_avx2(widths: &[u8], first_block: usize, off: usize, payload: &[u8], step: f64, plain: bool, dst: &mut [f32]) {
    decode_group_body(widths, first_block, off, payload, step, plain, dst)
}

fn decode_group(widths: &[u8], first_block: usize, off: usize, payload: &[u8], step: f64, plain: bool, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected on this CPU.
        return unsafe { decode_group_avx2(widths, first_block, off, payload, step, plain, dst) };
    }
    decode_group_body(widths, first_block, off, payload, step, plain, dst)
}

/// A checked Szp stream: every block can be decoded alone.
#[derive(Debug, Clone)]
pub struct SzpReader<'a> {
    header: Header,
    n: usize,
    layout: Layout,
    widths: &'a [u8],
    group_offsets: Vec<u64>,
    payload: &'a [u8],
}

impl<'a> SzpReader<'a> {
    /// Verify the stream (magic, version, checksums, lengths, offsets) once.
    /// Allocation is bounded by the stream's own length: the width table
    /// must be present in full before anything is sized from the header.
    pub fn new(bytes: &'a [u8]) -> Result<Self, Error> {
        let (h, body) = format::check_stream(bytes)?;
        if h.codec != CodecId::Szp {
            return Err(Error::WrongCodec { expected: "szp", found: h.codec.name() });
        }
        let n = h.values()?;
        let layout = Layout::new(n).ok_or_else(|| Error::corrupt("value count overflows"))?;
        let prefix = layout.prefix_len().ok_or_else(|| Error::corrupt("value count overflows"))?;
        if body.len() < prefix {
            return Err(Error::corrupt(format!("body of {} bytes cannot hold {} block widths", body.len(), layout.nblocks)));
        }
        if n > 0 && !(h.step.is_finite() && h.step > 0.0) {
            return Err(Error::corrupt(format!("step {} is not positive and finite", h.step)));
        }
        if !(h.bound_abs.is_finite() && h.bound_abs >= 0.0) {
            return Err(Error::corrupt(format!("bound {} is not finite and >= 0", h.bound_abs)));
        }
        let widths = &body[..layout.widths_len];
        let used_bits = layout.nblocks * WIDTH_BITS;
        if !used_bits.is_multiple_of(8) && widths[layout.widths_len - 1] >> (used_bits % 8) != 0 {
            return Err(Error::corrupt("padding bits of the width table are not 0"));
        }
        let table = &body[layout.widths_len..prefix];
        let payload = &body[prefix..];
        let mut group_offsets = Vec::with_capacity(layout.ngroups);
        let mut off = 0u64;
        for g in 0..layout.ngroups {
            let stored = format::u64_at(table, 8 * g);
            if stored != off {
                return Err(Error::corrupt(format!("group {g} offset {stored}, expected {off}")));
            }
            group_offsets.push(off);
            let end = ((g + 1) * GROUP_BLOCKS).min(layout.nblocks);
            for b in g * GROUP_BLOCKS..end {
                off += block_bytes(width_at(widths, b)) as u64;
            }
        }
        if off != payload.len() as u64 {
            return Err(Error::corrupt(format!("payload is {} bytes, widths say {off}", payload.len())));
        }
        Ok(SzpReader { header: h, n, layout, widths, group_offsets, payload })
    }

    /// Per-block widths and payload offsets, the payload, and the value count
    /// (for the GPU decoders).
    #[allow(dead_code)]
    pub(crate) fn table(&self) -> (Vec<u8>, Vec<u64>, &'a [u8], usize) {
        let widths: Vec<u8> = (0..self.layout.nblocks).map(|b| width_at(self.widths, b)).collect();
        let (offsets, _) = block_offsets(&widths);
        (widths, offsets, self.payload, self.n)
    }

    /// The stream's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Number of blocks.
    pub fn blocks(&self) -> usize {
        self.layout.nblocks
    }

    /// Decode block `b` alone into `out` (its values; the last block may be
    /// short): finds the block from its group's offset and the widths before
    /// it in the group. Returns the number of values written.
    pub fn block(&self, b: usize, out: &mut [f32; BLOCK]) -> Result<usize, Error> {
        if b >= self.layout.nblocks {
            return Err(Error::corrupt(format!("block {b} of {}", self.layout.nblocks)));
        }
        let g = b / GROUP_BLOCKS;
        let mut off = self.group_offsets[g] as usize;
        for i in g * GROUP_BLOCKS..b {
            off += block_bytes(width_at(self.widths, i));
        }
        let w = width_at(self.widths, b);
        let len = (self.n - b * BLOCK).min(BLOCK);
        let plain = self.header.mode == SzpMode::Plain;
        decode_block(&self.payload[off..off + block_bytes(w)], w, self.header.step, plain, &mut out[..len]);
        Ok(len)
    }

    /// Decode every block (in parallel over groups), appending to `out`.
    pub fn decode_into(&self, out: &mut Vec<f32>) {
        let start = out.len();
        out.resize(start + self.n, 0.0);
        let step = self.header.step;
        let plain = self.header.mode == SzpMode::Plain;
        out[start..].par_chunks_mut(GROUP_BLOCKS * BLOCK).enumerate().for_each(|(g, dst)| {
            decode_group(self.widths, g * GROUP_BLOCKS, self.group_offsets[g] as usize, self.payload, step, plain, dst);
        });
    }
}

/// Decode an Szp stream, appending to `out`.
pub fn decode(bytes: &[u8], out: &mut Vec<f32>) -> Result<Header, Error> {
    let r = SzpReader::new(bytes)?;
    r.decode_into(out);
    Ok(r.header)
}

#[allow(dead_code)]
const _: () = assert!(HEADER_LEN == 64);

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU's magic-number rounding equals `rint` (round half to even in
    /// f64, what the kernel calls) over the whole accepted range, ties included.
    #[test]
    fn cpu_rounding_matches_the_kernels_rint() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200_000 {
            let v = f32::from_bits(next() as u32);
            if !v.is_finite() {
                continue;
            }
            let inv = [1.0, 0.5, 3.0, 1e3, 1.0 / 0.012, 2f64.powi(20)][(next() % 6) as usize];
            let p = v as f64 * inv;
            if p.abs() > MAX_QUANT {
                continue;
            }
            assert_eq!(quant(v, inv), p.round_ties_even() as i32, "{v} * {inv}");
        }
        for k in -1000..1000 {
            let v = k as f32 + 0.5;
            assert_eq!(quant(v, 1.0), (v as f64).round_ties_even() as i32);
        }
    }

    /// The AVX2 build of the block loops writes the same bytes as the baseline build.
    #[test]
    fn simd_versions_agree() {
        let x: Vec<f32> = (0..GROUP_BLOCKS * BLOCK - 7).map(|i| ((i as f32) * 0.7331).sin() * (1.0 + (i % 97) as f32)).collect();
        for plain in [false, true] {
            for inv in [1.0, 37.5, 4096.0] {
                let a = encode_group_body(&x, inv, plain);
                let b = encode_group(&x, inv, plain);
                assert_eq!(a, b);
                let (mut da, mut db) = (vec![0f32; x.len()], vec![0f32; x.len()]);
                let mut packed = Vec::new();
                pack_widths(&a.0, &mut packed);
                decode_group_body(&packed, 0, 0, &a.1, 1.0 / inv, plain, &mut da);
                decode_group(&packed, 0, 0, &a.1, 1.0 / inv, plain, &mut db);
                assert!(da.iter().zip(&db).all(|(p, q)| p.to_bits() == q.to_bits()));
            }
        }
    }

    /// Widths are the kernel's `32 - clz(max |coded|)`; a block round-trips.
    #[test]
    fn block_round_trip_and_width() {
        let x: Vec<f32> = (0..BLOCK).map(|i| (i as f32 - 13.0) * 0.37).collect();
        for plain in [false, true] {
            let mut p = Vec::new();
            let w = encode_block(&x, 10.0, plain, &mut p);
            let v = coded(&x, 10.0, plain);
            let or = v.iter().fold(0u32, |o, c| o | c.unsigned_abs());
            assert_eq!(w as u32, 32 - or.leading_zeros());
            assert_eq!(p.len(), block_bytes(w));
            let mut out = [0f32; BLOCK];
            decode_block(&p, w, 0.1, plain, &mut out);
            for (a, b) in x.iter().zip(&out) {
                assert!((a - b).abs() <= 0.05 + 1e-6, "{a} {b}");
            }
        }
    }
}
