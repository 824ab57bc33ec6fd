//! The BERT encoder forward pass on the CPU, one sequence at a time.
//!
//! Each sequence runs alone (no padding, no attention mask) with
//! single-threaded GEMM (the `gemm` crate); a batch runs its sequences in
//! parallel on the rayon pool. So an embedding depends only on its own text:
//! batch size and thread count never change a bit of it.

use gemm::{Parallelism, gemm};

/// One transformer layer's weights (PyTorch `Linear` layout: `[out, in]`).
pub(crate) struct Layer {
    pub qkv_w: Vec<f32>,
    pub qkv_b: Vec<f32>,
    pub attn_out_w: Vec<f32>,
    pub attn_out_b: Vec<f32>,
    pub ln1_g: Vec<f32>,
    pub ln1_b: Vec<f32>,
    pub inter_w: Vec<f32>,
    pub inter_b: Vec<f32>,
    pub out_w: Vec<f32>,
    pub out_b: Vec<f32>,
    pub ln2_g: Vec<f32>,
    pub ln2_b: Vec<f32>,
}

/// Weights and shape of a BERT encoder.
pub(crate) struct Bert {
    pub word: Vec<f32>,
    pub pos: Vec<f32>,
    pub typ: Vec<f32>,
    pub ln_g: Vec<f32>,
    pub ln_b: Vec<f32>,
    pub layers: Vec<Layer>,
    pub hidden: usize,
    pub heads: usize,
    pub inter: usize,
    pub eps: f32,
    pub vocab: usize,
    pub max_pos: usize,
    /// XXH3-64 of the weights file: part of the model id, so embedding
    /// caches never mix two models that share a directory name.
    pub fingerprint: u64,
}

/// `y[l, n] = x[l, k] * wt[k, n] + b[n]`, with `wt` the transposed PyTorch weight.
fn linear(x: &[f32], l: usize, k: usize, w: &[f32], b: &[f32], n: usize, y: &mut [f32]) {
    debug_assert_eq!(x.len(), l * k);
    debug_assert_eq!(w.len(), n * k);
    debug_assert_eq!(y.len(), l * n);
    // SAFETY: the pointers cover l*k, n*k and l*n elements with the strides given.
    unsafe {
        gemm(
            l,
            n,
            k,
            y.as_mut_ptr(),
            1,
            n as isize,
            false,
            x.as_ptr(),
            1,
            k as isize,
            w.as_ptr(),
            1,
            n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        );
    }
    for row in y.chunks_exact_mut(n) {
        for (v, bb) in row.iter_mut().zip(b) {
            *v += bb;
        }
    }
}

fn layer_norm(x: &mut [f32], h: usize, g: &[f32], b: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, gg), bb) in row.iter_mut().zip(g).zip(b) {
            *v = (*v - mean) * inv * gg + bb;
        }
    }
}

/// `exp(x)` for `x` in about [-87, 88] (Cephes `expf`: range reduction by
/// ln 2 and a degree-6 polynomial, about 1 ulp). Branch-free, so loops over
/// it vectorise; no fused multiply-add, so every SIMD width gives the same bits.
#[inline(always)]
fn exp_approx(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    // Plain comparisons (not `clamp`/`as i32`, whose NaN and saturation
    // rules keep the loop scalar).
    let x = if x > -87.0 { x } else { -87.0 };
    let x = if x < 88.0 { x } else { 88.0 };
    let shifted = x * LOG2E + ROUND;
    let n = shifted - ROUND;
    // The integer n sits in the low mantissa bits of `shifted`.
    let ni = (shifted.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_2e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5e-1;
    let y = p * r * r + r + 1.0;
    y * f32::from_bits((ni.wrapping_add(127) as u32) << 23)
}

/// `erf(x)`, Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7).
#[inline(always)]
fn erf_approx(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_7) * t - 0.284_496_74) * t + 0.254_829_6) * t;
    (1.0 - poly * exp_approx(-a * a)).copysign(x)
}

#[inline(always)]
fn gelu_body(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf_approx(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gelu_avx2(x: &mut [f32]) {
    gelu_body(x);
}

/// Exact-erf GELU (BERT's `gelu`), vectorised.
fn gelu(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present.
            return unsafe { gelu_avx2(x) };
        }
    }
    gelu_body(x);
}

#[inline(always)]
fn softmax_body(s: &mut [f32], n: usize) {
    const W: usize = 16;
    for row in s.chunks_exact_mut(n) {
        // Maximum: exact in any order.
        let mut mx = [f32::NEG_INFINITY; W];
        let (full, rest) = row.as_chunks::<W>();
        for c in full {
            for i in 0..W {
                mx[i] = if c[i] > mx[i] { c[i] } else { mx[i] };
            }
        }
        let mut m = f32::NEG_INFINITY;
        for &v in mx.iter().chain(rest) {
            m = if v > m { v } else { m };
        }
        // Exponentials summed in 16 fixed lanes and a fixed tree, so the sum
        // has the same bits on every SIMD width (and vectorises).
        let mut acc = [0.0f32; W];
        let (full, rest) = row.as_chunks_mut::<W>();
        for c in full {
            for i in 0..W {
                let e = exp_approx(c[i] - m);
                c[i] = e;
                acc[i] += e;
            }
        }
        for (i, v) in rest.iter_mut().enumerate() {
            let e = exp_approx(*v - m);
            *v = e;
            acc[i] += e;
        }
        let mut w = W;
        while w > 1 {
            w /= 2;
            for i in 0..w {
                acc[i] += acc[i + w];
            }
        }
        let inv = 1.0 / acc[0];
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn softmax_avx2(s: &mut [f32], n: usize) {
    softmax_body(s, n);
}

fn softmax_rows(s: &mut [f32], n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present.
            return unsafe { softmax_avx2(s, n) };
        }
    }
    softmax_body(s, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approximations_are_accurate() {
        let mut worst_exp = 0.0f64;
        let mut worst_erf = 0.0f64;
        for i in -80_000..=10_000 {
            let x = i as f32 * 1e-3;
            let e = f64::from(exp_approx(x));
            let want = f64::from(x).exp();
            worst_exp = worst_exp.max(((e - want) / want).abs());
            let want = libm::erf(f64::from(x));
            worst_erf = worst_erf.max((f64::from(erf_approx(x)) - want).abs());
        }
        assert!(worst_exp < 3e-7, "exp relative error {worst_exp}");
        assert!(worst_erf < 1e-6, "erf absolute error {worst_erf}");
        let mut a = vec![0.3f32, -1.2, 4.0, -7.5, 0.0];
        let b = a.clone();
        gelu(&mut a);
        let mut c = b.clone();
        gelu_body(&mut c);
        assert_eq!(a, c, "SIMD and portable GELU differ");
        for (g, x) in a.iter().zip(&b) {
            let want = 0.5 * f64::from(*x) * (1.0 + libm::erf(f64::from(*x) / 2f64.sqrt()));
            assert!((f64::from(*g) - want).abs() < 1e-6);
        }
    }
}

/// Per-thread buffers, reused across sequences so large activations are not
/// freshly mapped (and page-faulted) for every chunk.
#[derive(Default)]
struct Scratch {
    qkv: Vec<f32>,
    scores: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    inter: Vec<f32>,
}

fn sized(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    if v.len() < n {
        v.resize(n, 0.0);
    }
    &mut v[..n]
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

impl Bert {
    /// Hidden states `[ids.len(), hidden]` of one sequence (ids include [CLS]/[SEP]).
    pub fn forward(&self, ids: &[u32]) -> Vec<f32> {
        SCRATCH.with(|s| self.forward_with(ids, &mut s.borrow_mut()))
    }

    fn forward_with(&self, ids: &[u32], sc: &mut Scratch) -> Vec<f32> {
        let (l, h) = (ids.len(), self.hidden);
        let d = h / self.heads;
        let mut x = vec![0.0f32; l * h];
        for (p, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(h)).enumerate() {
            let id = (id as usize).min(self.vocab - 1);
            let w = &self.word[id * h..(id + 1) * h];
            let ps = &self.pos[p * h..(p + 1) * h];
            let t = &self.typ[..h];
            for k in 0..h {
                row[k] = w[k] + t[k] + ps[k];
            }
        }
        layer_norm(&mut x, h, &self.ln_g, &self.ln_b, self.eps);
        let Scratch { qkv, scores, ctx, tmp, inter } = sc;
        let qkv = sized(qkv, l * 3 * h);
        let scores = sized(scores, l * l);
        let ctx = sized(ctx, l * h);
        let tmp = sized(tmp, l * h);
        let inter = sized(inter, l * self.inter);
        let scale = 1.0 / (d as f32).sqrt();
        for layer in &self.layers {
            linear(&x, l, h, &layer.qkv_w, &layer.qkv_b, 3 * h, qkv);
            for head in 0..self.heads {
                let q = qkv[head * d..].as_ptr();
                let k = qkv[h + head * d..].as_ptr();
                let v = qkv[2 * h + head * d..].as_ptr();
                // SAFETY: q, k and v address l rows of d values with row stride 3h
                // inside qkv; scores is l*l; ctx columns head*d.. with row stride h.
                unsafe {
                    gemm(
                        l,
                        l,
                        d,
                        scores.as_mut_ptr(),
                        1,
                        l as isize,
                        false,
                        q,
                        1,
                        (3 * h) as isize,
                        k,
                        (3 * h) as isize,
                        1,
                        0.0,
                        scale,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
                softmax_rows(scores, l);
                unsafe {
                    gemm(
                        l,
                        d,
                        l,
                        ctx[head * d..].as_mut_ptr(),
                        1,
                        h as isize,
                        false,
                        scores.as_ptr(),
                        1,
                        l as isize,
                        v,
                        1,
                        (3 * h) as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
            }
            linear(ctx, l, h, &layer.attn_out_w, &layer.attn_out_b, h, tmp);
            for (a, b) in x.iter_mut().zip(tmp.iter()) {
                *a += b;
            }
            layer_norm(&mut x, h, &layer.ln1_g, &layer.ln1_b, self.eps);
            linear(&x, l, h, &layer.inter_w, &layer.inter_b, self.inter, inter);
            gelu(inter);
            linear(inter, l, self.inter, &layer.out_w, &layer.out_b, h, tmp);
            for (a, b) in x.iter_mut().zip(tmp.iter()) {
                *a += b;
            }
            layer_norm(&mut x, h, &layer.ln2_g, &layer.ln2_b, self.eps);
        }
        x
    }
}

/// Load weights from a safetensors file (F32, F16 or BF16 tensors).
pub(crate) fn load(path: &std::path::Path, cfg: &serde_json::Value) -> Result<Bert, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let fingerprint = xxhash_rust::xxh3::xxh3_64(&bytes);
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
    let names: Vec<String> = st.names().into_iter().map(|n| n.to_string()).collect();
    // Some checkpoints prefix every name with "bert.".
    let prefix = if names.iter().any(|n| n.starts_with("bert.embeddings.")) { "bert." } else { "" };
    let get = |name: &str, len: usize| -> Result<Vec<f32>, String> {
        let full = format!("{prefix}{name}");
        let t = st.tensor(&full).map_err(|_| format!("tensor `{full}` missing"))?;
        let data = t.data();
        let v: Vec<f32> = match t.dtype() {
            safetensors::Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            safetensors::Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            safetensors::Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            other => return Err(format!("tensor `{full}` has unsupported dtype {other:?}")),
        };
        if v.len() != len {
            return Err(format!("tensor `{full}` has {} values, expected {len}", v.len()));
        }
        Ok(v)
    };
    let n = |k: &str| cfg.get(k).and_then(serde_json::Value::as_u64).map(|v| v as usize).ok_or_else(|| format!("config.json: no `{k}`"));
    let (h, heads, inter, layers, vocab, max_pos) =
        (n("hidden_size")?, n("num_attention_heads")?, n("intermediate_size")?, n("num_hidden_layers")?, n("vocab_size")?, n("max_position_embeddings")?);
    let types = n("type_vocab_size").unwrap_or(2);
    let eps = cfg.get("layer_norm_eps").and_then(serde_json::Value::as_f64).unwrap_or(1e-12) as f32;
    if h % heads != 0 {
        return Err("config.json: hidden_size is not a multiple of num_attention_heads".into());
    }
    match cfg.get("hidden_act").and_then(serde_json::Value::as_str) {
        None | Some("gelu") => {}
        Some(other) => return Err(format!("config.json: hidden_act `{other}` is not supported (gelu only)")),
    }
    // PyTorch stores Linear weights as [out, in]; keep them as [in, out] so
    // GEMM reads the right-hand side row-major.
    let t = |w: Vec<f32>, out: usize, inp: usize| -> Vec<f32> {
        let mut v = vec![0.0f32; w.len()];
        for o in 0..out {
            for i in 0..inp {
                v[i * out + o] = w[o * inp + i];
            }
        }
        v
    };
    let mut ls = Vec::with_capacity(layers);
    for i in 0..layers {
        let p = format!("encoder.layer.{i}.");
        let mut qkv_w = get(&format!("{p}attention.self.query.weight"), h * h)?;
        qkv_w.extend(get(&format!("{p}attention.self.key.weight"), h * h)?);
        qkv_w.extend(get(&format!("{p}attention.self.value.weight"), h * h)?);
        let mut qkv_b = get(&format!("{p}attention.self.query.bias"), h)?;
        qkv_b.extend(get(&format!("{p}attention.self.key.bias"), h)?);
        qkv_b.extend(get(&format!("{p}attention.self.value.bias"), h)?);
        ls.push(Layer {
            qkv_w: t(qkv_w, 3 * h, h),
            qkv_b,
            attn_out_w: t(get(&format!("{p}attention.output.dense.weight"), h * h)?, h, h),
            attn_out_b: get(&format!("{p}attention.output.dense.bias"), h)?,
            ln1_g: get(&format!("{p}attention.output.LayerNorm.weight"), h)?,
            ln1_b: get(&format!("{p}attention.output.LayerNorm.bias"), h)?,
            inter_w: t(get(&format!("{p}intermediate.dense.weight"), inter * h)?, inter, h),
            inter_b: get(&format!("{p}intermediate.dense.bias"), inter)?,
            out_w: t(get(&format!("{p}output.dense.weight"), h * inter)?, h, inter),
            out_b: get(&format!("{p}output.dense.bias"), h)?,
            ln2_g: get(&format!("{p}output.LayerNorm.weight"), h)?,
            ln2_b: get(&format!("{p}output.LayerNorm.bias"), h)?,
        });
    }
    Ok(Bert {
        word: get("embeddings.word_embeddings.weight", vocab * h)?,
        pos: get("embeddings.position_embeddings.weight", max_pos * h)?,
        typ: get("embeddings.token_type_embeddings.weight", types * h)?,
        ln_g: get("embeddings.LayerNorm.weight", h)?,
        ln_b: get("embeddings.LayerNorm.bias", h)?,
        layers: ls,
        hidden: h,
        heads,
        inter,
        eps,
        vocab,
        max_pos,
        fingerprint,
    })
}
