//! The GPU forward pass as a sequence of device operations (cuBLAS-style
//! GEMMs and the kernels of `kernels/bert.cu`) over raw device addresses,
//! written once against [`Dev`]. The CUDA encoder runs it on cudarc; the
//! tests run the same sequence on a CPU emulator of the device (naive
//! column-major GEMMs and a line-by-line Rust transcription of each kernel),
//! which checks every shape, stride, offset and mask against the CPU encoder
//! without a GPU.

use crate::forward::Bert;

/// Storage kind of GEMM inputs: 0 fp32, 1 bf16, 2 fp16 (as in `bert.cu`).
pub(crate) type Kind = i32;

/// The kernels of `bert.cu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    EmbedLn,
    ResidualLn,
    BiasGelu,
    SplitHeads,
    MaskedSoftmax,
    MergeHeads,
    Pool,
}

impl Kernel {
    pub(crate) const ALL: [Kernel; 7] =
        [Kernel::EmbedLn, Kernel::ResidualLn, Kernel::BiasGelu, Kernel::SplitHeads, Kernel::MaskedSoftmax, Kernel::MergeHeads, Kernel::Pool];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::EmbedLn => "embed_ln",
            Kernel::ResidualLn => "residual_ln",
            Kernel::BiasGelu => "bias_gelu",
            Kernel::SplitHeads => "split_heads",
            Kernel::MaskedSoftmax => "masked_softmax",
            Kernel::MergeHeads => "merge_heads",
            Kernel::Pool => "pool",
        }
    }
}

/// One kernel argument, in the C parameter's type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Arg {
    /// A device address (`T*` / `void*`).
    Ptr(u64),
    /// `int`.
    I32(i32),
    /// `float`.
    F32(f32),
    /// `size_t`.
    Usize(usize),
}

/// A GEMM in cuBLAS's column-major terms: `C[m x n] = alpha * op(A) * B`,
/// A and B in the storage kind, C fp32; `batch > 1` is strided batched.
/// Operands are `(address, leading dimension, stride between batch items)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gemm {
    pub trans_a: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub a: (u64, usize, usize),
    pub b: (u64, usize, usize),
    pub c: (u64, usize, usize),
    pub batch: usize,
}

/// What the forward pass needs from a device.
pub(crate) trait Dev {
    /// Copy bytes to a new device buffer; returns its address.
    fn upload(&mut self, bytes: &[u8]) -> Result<u64, String>;
    /// A zeroed device buffer of `n` bytes; returns its address.
    fn alloc(&mut self, n: usize) -> Result<u64, String>;
    /// Copy bytes into an existing buffer at `dst`.
    fn write(&mut self, dst: u64, bytes: &[u8]) -> Result<(), String>;
    /// Read `n` bytes at `src` (waits for the device).
    fn read(&mut self, src: u64, n: usize) -> Result<Vec<u8>, String>;
    /// Free every buffer made by `alloc` (scratch), keeping uploads.
    fn free_scratch(&mut self);
    /// Run one GEMM.
    fn gemm(&mut self, g: &Gemm, kind: Kind) -> Result<(), String>;
    /// Launch `k` on `grid` blocks of `block` threads.
    fn launch(&mut self, k: Kernel, grid: usize, block: u32, args: &[Arg]) -> Result<(), String>;
}

pub(crate) fn bytes_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `v` in storage kind `kind` (16-bit kinds round to nearest even).
pub(crate) fn bytes_in(v: &[f32], kind: Kind) -> Vec<u8> {
    match kind {
        0 => bytes_f32(v),
        1 => v.iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect(),
        _ => v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect(),
    }
}

/// A linear layer on the device: weight `[in, out]` row-major in the storage kind, fp32 bias.
#[derive(Debug, Clone, Copy)]
struct Linear {
    w: u64,
    b: u64,
    n_in: usize,
    n_out: usize,
}

#[derive(Debug, Clone, Copy)]
struct Layer {
    qkv: Linear,
    attn_out: Linear,
    ln1: (u64, u64),
    inter: Linear,
    out: Linear,
    ln2: (u64, u64),
}

/// Scratch addresses for the largest batch so far.
#[derive(Debug, Default, Clone)]
struct Scratch {
    tokens: usize,
    seqs: usize,
    scores: usize,
    p: Vec<u64>,
}

/// A BERT model's weights on a device, and the forward pass over them.
#[derive(Debug)]
pub(crate) struct Model {
    word: u64,
    pos: u64,
    typ: u64,
    ln_emb: (u64, u64),
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    inter: usize,
    vocab: usize,
    pub(crate) max_pos: usize,
    eps: f32,
    kind: Kind,
    scratch: Scratch,
}

/// Threads for one-row-per-block kernels over rows of `n` values: a power of two in 32..=256.
fn row_threads(n: usize) -> u32 {
    n.div_ceil(2).next_power_of_two().clamp(32, 256) as u32
}

impl Model {
    /// Upload `m`'s weights: matrices in storage kind `kind`, the rest fp32.
    pub(crate) fn upload<D: Dev>(dev: &mut D, m: &Bert, kind: Kind) -> Result<Self, String> {
        let mut up = |v: &[f32], k: Kind| dev.upload(&bytes_in(v, k));
        let mut layers = Vec::with_capacity(m.layers.len());
        let (h, i) = (m.hidden, m.inter);
        for l in &m.layers {
            let mut lin =
                |w: &[f32], b: &[f32], n_in: usize, n_out: usize| -> Result<Linear, String> { Ok(Linear { w: up(w, kind)?, b: up(b, 0)?, n_in, n_out }) };
            let qkv = lin(&l.qkv_w, &l.qkv_b, h, 3 * h)?;
            let attn_out = lin(&l.attn_out_w, &l.attn_out_b, h, h)?;
            let inter = lin(&l.inter_w, &l.inter_b, h, i)?;
            let out = lin(&l.out_w, &l.out_b, i, h)?;
            layers.push(Layer { qkv, attn_out, inter, out, ln1: (up(&l.ln1_g, 0)?, up(&l.ln1_b, 0)?), ln2: (up(&l.ln2_g, 0)?, up(&l.ln2_b, 0)?) });
        }
        Ok(Model {
            word: up(&m.word, 0)?,
            pos: up(&m.pos, 0)?,
            typ: up(&m.typ, 0)?,
            ln_emb: (up(&m.ln_g, 0)?, up(&m.ln_b, 0)?),
            layers,
            hidden: h,
            heads: m.heads,
            inter: i,
            vocab: m.vocab,
            max_pos: m.max_pos,
            eps: m.eps,
            kind,
            scratch: Scratch::default(),
        })
    }

    fn elem(&self) -> usize {
        if self.kind == 0 { 4 } else { 2 }
    }

    /// Grow the scratch buffers for `t` padded tokens of `b` sequences of length `l`.
    fn ensure<D: Dev>(&mut self, dev: &mut D, t: usize, b: usize, l: usize) -> Result<(), String> {
        let (h, e) = (self.hidden, self.elem());
        let scores = b * self.heads * l * l;
        let sc = &self.scratch;
        if t <= sc.tokens && b <= sc.seqs && scores <= sc.scores {
            return Ok(());
        }
        let (t, b, scores) = (t.max(sc.tokens), b.max(sc.seqs), scores.max(sc.scores));
        // ids, lens, x, xg, y, qkv (head-major), s, p, ctx, ctxg, interg, pooled
        let sizes = [
            t * 4,
            b * 4,
            t * h * 4,
            t * h * e,
            t * (3 * h).max(self.inter) * 4,
            3 * t * h * e,
            scores * 4,
            scores * e,
            t * h * 4,
            t * h * e,
            t * self.inter * e,
            b * h * 4,
        ];
        dev.free_scratch();
        let p = sizes.iter().map(|&s| dev.alloc(s.max(4))).collect::<Result<Vec<u64>, String>>()?;
        self.scratch = Scratch { tokens: t, seqs: b, scores, p };
        Ok(())
    }

    /// `y[t, out] = x[t, in] * W` for row-major activations and `[in, out]` weights.
    fn linear<D: Dev>(&self, dev: &mut D, x: u64, t: usize, l: &Linear, y: u64) -> Result<(), String> {
        dev.gemm(
            &Gemm { trans_a: false, m: l.n_out, n: t, k: l.n_in, alpha: 1.0, a: (l.w, l.n_out, 0), b: (x, l.n_in, 0), c: (y, l.n_out, 0), batch: 1 },
            self.kind,
        )
    }

    /// Pooled, not yet normalised rows `[seqs.len(), hidden]` of one padded
    /// batch (`cls`: the first token's row, else the mean over real tokens).
    pub(crate) fn forward<D: Dev>(&mut self, dev: &mut D, seqs: &[&[u32]], cls: bool) -> Result<Vec<f32>, String> {
        use Arg::{F32, I32, Ptr, Usize};
        let b = seqs.len();
        let l = seqs.iter().map(|s| s.len()).max().unwrap_or(1).max(1);
        if l > self.max_pos {
            return Err(format!("a sequence of {l} tokens exceeds the position table ({})", self.max_pos));
        }
        let t = b * l;
        self.ensure(dev, t, b, l)?;
        let (h, heads, inter, kind, eps) = (self.hidden, self.heads, self.inter, self.kind, self.eps);
        let d = h / heads;
        let mut ids = vec![0u32; t];
        for (i, q) in seqs.iter().enumerate() {
            ids[i * l..i * l + q.len()].copy_from_slice(q);
        }
        let p = self.scratch.p.clone();
        dev.write(p[0], &ids.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())?;
        dev.write(p[1], &seqs.iter().flat_map(|q| (q.len() as u32).to_le_bytes()).collect::<Vec<u8>>())?;
        let (ids_p, lens, x, y, qkv, sc, ctx, pooled) = (p[0], p[1], p[2], p[4], p[5], p[6], p[8], p[11]);
        // In fp32 the GEMMs read the fp32 buffers themselves (kind 0 writes no copy).
        let f32_path = kind == 0;
        let xg = if f32_path { x } else { p[3] };
        let pr = if f32_path { sc } else { p[7] };
        // Never `y`: the next GEMM reads this while writing `y`.
        let (interg, ctxg) = (p[10], p[9]);
        let (li, hi, hds) = (I32(l as i32), I32(h as i32), I32(heads as i32));
        let rt = row_threads(h);
        let e = self.elem() as u64;
        dev.launch(
            Kernel::EmbedLn,
            t,
            rt,
            &[
                Ptr(ids_p),
                Ptr(lens),
                li,
                hi,
                I32(self.vocab as i32),
                Ptr(self.word),
                Ptr(self.pos),
                Ptr(self.typ),
                Ptr(self.ln_emb.0),
                Ptr(self.ln_emb.1),
                F32(eps),
                Ptr(x),
                Ptr(xg),
                I32(kind),
            ],
        )?;
        let scale = 1.0 / (d as f32).sqrt();
        let bh = b * heads;
        for layer in &self.layers {
            self.linear(dev, xg, t, &layer.qkv, y)?;
            let n3 = t * 3 * h;
            dev.launch(Kernel::SplitHeads, n3.div_ceil(256), 256, &[Ptr(y), Ptr(layer.qkv.b), li, hi, hds, Usize(n3), Ptr(qkv), I32(kind)])?;
            let (q, k, v) = (qkv, qkv + (t * h) as u64 * e, qkv + (2 * t * h) as u64 * e);
            // scores[bh][q][k] = scale * sum_c K[k][c] Q[q][c]
            dev.gemm(&Gemm { trans_a: true, m: l, n: l, k: d, alpha: scale, a: (k, d, l * d), b: (q, d, l * d), c: (sc, l, l * l), batch: bh }, kind)?;
            dev.launch(Kernel::MaskedSoftmax, bh * l, row_threads(l), &[Ptr(sc), Ptr(lens), li, hds, Ptr(pr), I32(kind)])?;
            // ctx[bh][q][c] = sum_k P[q][k] V[k][c]
            dev.gemm(&Gemm { trans_a: false, m: d, n: l, k: l, alpha: 1.0, a: (v, d, l * d), b: (pr, l, l * l), c: (ctx, d, l * d), batch: bh }, kind)?;
            let n1 = t * h;
            dev.launch(Kernel::MergeHeads, n1.div_ceil(256), 256, &[Ptr(ctx), li, hi, hds, Usize(n1), Ptr(ctxg), I32(kind)])?;
            self.linear(dev, ctxg, t, &layer.attn_out, y)?;
            let ln1 = [Ptr(x), Ptr(y), Ptr(layer.attn_out.b), hi, Ptr(layer.ln1.0), Ptr(layer.ln1.1), F32(eps), Ptr(xg), I32(kind)];
            dev.launch(Kernel::ResidualLn, t, rt, &ln1)?;
            self.linear(dev, xg, t, &layer.inter, y)?;
            let ni = t * inter;
            dev.launch(Kernel::BiasGelu, ni.div_ceil(256), 256, &[Ptr(y), Ptr(layer.inter.b), I32(inter as i32), Usize(ni), Ptr(interg), I32(kind)])?;
            self.linear(dev, interg, t, &layer.out, y)?;
            let ln2 = [Ptr(x), Ptr(y), Ptr(layer.out.b), hi, Ptr(layer.ln2.0), Ptr(layer.ln2.1), F32(eps), Ptr(xg), I32(kind)];
            dev.launch(Kernel::ResidualLn, t, rt, &ln2)?;
        }
        dev.launch(Kernel::Pool, (b * h).div_ceil(128), 128, &[Ptr(x), Ptr(lens), li, hi, I32(b as i32), I32(cls as i32), Ptr(pooled)])?;
        let out = dev.read(pooled, b * h * 4)?;
        Ok(out.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

#[cfg(test)]
pub(crate) mod emulator;
