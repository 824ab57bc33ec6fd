//! A CPU emulator of the device the GPU forward pass drives: byte buffers at
//! fake addresses, cuBLAS column-major GEMM semantics (naive loops, 16-bit
//! operands decoded as cuBLAS reads them), and each kernel of `bert.cu`
//! transcribed thread by thread (one loop iteration per CUDA thread or
//! block). It checks the orchestration (shapes, strides, offsets, masks,
//! storage kinds) against the CPU encoder; the `.cu` text itself is checked
//! by NVRTC and runs in the GPU bundle.

use super::{Arg, Dev, Gemm, Kernel, Kind};

/// Buffers live at `(index + 1) << 40`, so an address names its buffer.
const SHIFT: u32 = 40;

#[derive(Debug, Default)]
pub(crate) struct Emu {
    bufs: Vec<Option<Vec<u8>>>,
    scratch: Vec<usize>,
    pub(crate) gemms: usize,
    pub(crate) launches: usize,
}

fn split(addr: u64) -> (usize, usize) {
    (((addr >> SHIFT) - 1) as usize, (addr & ((1u64 << SHIFT) - 1)) as usize)
}

fn bf16_round(v: f32) -> u16 {
    half::bf16::from_f32(v).to_bits()
}

impl Emu {
    fn buf(&self, addr: u64) -> (&[u8], usize) {
        let (i, off) = split(addr);
        (self.bufs[i].as_deref().expect("use after free"), off)
    }

    fn buf_mut(&mut self, addr: u64) -> (&mut Vec<u8>, usize) {
        let (i, off) = split(addr);
        (self.bufs[i].as_mut().expect("use after free"), off)
    }

    fn get(&self, addr: u64, i: usize, kind: Kind) -> f32 {
        let (b, off) = self.buf(addr);
        if kind == 0 {
            let o = off + 4 * i;
            f32::from_le_bytes(b[o..o + 4].try_into().expect("in bounds"))
        } else {
            let o = off + 2 * i;
            let bits = u16::from_le_bytes([b[o], b[o + 1]]);
            if kind == 1 { half::bf16::from_bits(bits).to_f32() } else { half::f16::from_bits(bits).to_f32() }
        }
    }

    fn f(&self, addr: u64, i: usize) -> f32 {
        self.get(addr, i, 0)
    }

    fn u(&self, addr: u64, i: usize) -> u32 {
        self.f(addr, i).to_bits()
    }

    fn put(&mut self, addr: u64, i: usize, v: f32, kind: Kind) {
        let (b, off) = self.buf_mut(addr);
        match kind {
            0 => b[off + 4 * i..off + 4 * i + 4].copy_from_slice(&v.to_le_bytes()),
            1 => b[off + 2 * i..off + 2 * i + 2].copy_from_slice(&bf16_round(v).to_le_bytes()),
            _ => b[off + 2 * i..off + 2 * i + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes()),
        }
    }

    fn new_buf(&mut self, bytes: Vec<u8>) -> u64 {
        self.bufs.push(Some(bytes));
        (self.bufs.len() as u64) << SHIFT
    }

    /// Layer norm of row `r` of `x` (h wide), as `ln_row` in bert.cu.
    #[allow(clippy::too_many_arguments)] // mirrors the kernel's parameter list
    fn ln_row(&mut self, x: u64, r: usize, h: usize, g: u64, bt: u64, eps: f32, xg: u64, kind: Kind) {
        let base = r * h;
        let mean = (0..h).map(|i| self.f(x, base + i)).sum::<f32>() / h as f32;
        let var = (0..h).map(|i| (self.f(x, base + i) - mean).powi(2)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for i in 0..h {
            let v = (self.f(x, base + i) - mean) * inv * self.f(g, i) + self.f(bt, i);
            self.put(x, base + i, v, 0);
            if kind != 0 {
                self.put(xg, base + i, v, kind);
            }
        }
    }
}

fn p(a: &Arg) -> u64 {
    match a {
        Arg::Ptr(p) => *p,
        other => panic!("expected a pointer, got {other:?}"),
    }
}
fn i(a: &Arg) -> usize {
    match a {
        Arg::I32(v) => *v as usize,
        Arg::Usize(v) => *v,
        other => panic!("expected an integer, got {other:?}"),
    }
}
fn fl(a: &Arg) -> f32 {
    match a {
        Arg::F32(v) => *v,
        other => panic!("expected a float, got {other:?}"),
    }
}
fn k(a: &Arg) -> Kind {
    i(a) as Kind
}

impl Dev for Emu {
    fn upload(&mut self, bytes: &[u8]) -> Result<u64, String> {
        Ok(self.new_buf(bytes.to_vec()))
    }

    fn alloc(&mut self, n: usize) -> Result<u64, String> {
        let a = self.new_buf(vec![0; n]);
        self.scratch.push(self.bufs.len() - 1);
        Ok(a)
    }

    fn write(&mut self, dst: u64, bytes: &[u8]) -> Result<(), String> {
        let (b, off) = self.buf_mut(dst);
        b[off..off + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn read(&mut self, src: u64, n: usize) -> Result<Vec<u8>, String> {
        let (b, off) = self.buf(src);
        Ok(b[off..off + n].to_vec())
    }

    fn free_scratch(&mut self) {
        for i in self.scratch.drain(..) {
            self.bufs[i] = None;
        }
    }

    fn gemm(&mut self, g: &Gemm, kind: Kind) -> Result<(), String> {
        self.gemms += 1;
        for bt in 0..g.batch.max(1) {
            let (a0, b0, c0) = (bt * g.a.2, bt * g.b.2, bt * g.c.2);
            for col in 0..g.n {
                for row in 0..g.m {
                    let mut acc = 0.0f32;
                    for q in 0..g.k {
                        let a = if g.trans_a { self.get(g.a.0, a0 + q + row * g.a.1, kind) } else { self.get(g.a.0, a0 + row + q * g.a.1, kind) };
                        acc += a * self.get(g.b.0, b0 + q + col * g.b.1, kind);
                    }
                    self.put(g.c.0, c0 + row + col * g.c.1, g.alpha * acc, 0);
                }
            }
        }
        Ok(())
    }

    fn launch(&mut self, kn: Kernel, grid: usize, block: u32, a: &[Arg]) -> Result<(), String> {
        self.launches += 1;
        let threads = grid * block as usize;
        match kn {
            Kernel::EmbedLn => self.embed_ln(grid, threads, a),
            Kernel::ResidualLn => self.residual_ln(grid, threads, a),
            Kernel::BiasGelu => self.bias_gelu(grid, threads, a),
            Kernel::SplitHeads => self.split_heads(grid, threads, a),
            Kernel::MaskedSoftmax => self.masked_softmax(grid, threads, a),
            Kernel::MergeHeads => self.merge_heads(grid, threads, a),
            Kernel::Pool => self.pool(grid, threads, a),
        }
        Ok(())
    }
}

impl Emu {
    /// The `embed_ln` kernel of `kernels/bert.cu`, thread by thread.
    fn embed_ln(&mut self, grid: usize, _threads: usize, a: &[Arg]) {
        let (ids, lens, l, h, vocab, word, pos, typ, g, bt, eps, x, xg, kind) =
            (p(&a[0]), p(&a[1]), i(&a[2]), i(&a[3]), i(&a[4]), p(&a[5]), p(&a[6]), p(&a[7]), p(&a[8]), p(&a[9]), fl(&a[10]), p(&a[11]), p(&a[12]), k(&a[13]));
        for row in 0..grid {
            let (b, ps) = (row / l, row % l);
            let mut id = if ps < self.u(lens, b) as usize { self.u(ids, row) as usize } else { 0 };
            if id >= vocab {
                id = vocab - 1;
            }
            for c in 0..h {
                let v = self.f(word, id * h + c) + self.f(typ, c) + self.f(pos, ps * h + c);
                self.put(x, row * h + c, v, 0);
            }
            self.ln_row(x, row, h, g, bt, eps, xg, kind);
        }
    }

    /// The `residual_ln` kernel of `kernels/bert.cu`, thread by thread.
    fn residual_ln(&mut self, grid: usize, _threads: usize, a: &[Arg]) {
        let (x, y, bias, h, g, bt, eps, xg, kind) = (p(&a[0]), p(&a[1]), p(&a[2]), i(&a[3]), p(&a[4]), p(&a[5]), fl(&a[6]), p(&a[7]), k(&a[8]));
        for row in 0..grid {
            for c in 0..h {
                let v = self.f(x, row * h + c) + (self.f(y, row * h + c) + self.f(bias, c));
                self.put(x, row * h + c, v, 0);
            }
            self.ln_row(x, row, h, g, bt, eps, xg, kind);
        }
    }

    /// The `bias_gelu` kernel of `kernels/bert.cu`, thread by thread.
    fn bias_gelu(&mut self, _grid: usize, threads: usize, a: &[Arg]) {
        let (y, bias, inter, n, out, kind) = (p(&a[0]), p(&a[1]), i(&a[2]), i(&a[3]), p(&a[4]), k(&a[5]));
        for t in 0..threads.min(n) {
            let v = self.f(y, t) + self.f(bias, t % inter);
            let gl = 0.5 * v * (1.0 + libm::erff(v * std::f32::consts::FRAC_1_SQRT_2));
            self.put(out, t, gl, kind);
        }
    }

    /// The `split_heads` kernel of `kernels/bert.cu`, thread by thread.
    fn split_heads(&mut self, _grid: usize, threads: usize, a: &[Arg]) {
        let (qkv, bias, l, h, heads, n, out, kind) = (p(&a[0]), p(&a[1]), i(&a[2]), i(&a[3]), i(&a[4]), i(&a[5]), p(&a[6]), k(&a[7]));
        let d = h / heads;
        let tt = n / (3 * h);
        for t in 0..threads.min(n) {
            let (row, col) = (t / (3 * h), t % (3 * h));
            let (which, head, c) = (col / h, (col % h) / d, col % d);
            let (b, ps) = (row / l, row % l);
            let dst = which * tt * h + ((b * heads + head) * l + ps) * d + c;
            let v = self.f(qkv, t) + self.f(bias, col);
            self.put(out, dst, v, kind);
        }
    }

    /// The `masked_softmax` kernel of `kernels/bert.cu`, thread by thread.
    fn masked_softmax(&mut self, grid: usize, _threads: usize, a: &[Arg]) {
        let (s, lens, l, heads, out, kind) = (p(&a[0]), p(&a[1]), i(&a[2]), i(&a[3]), p(&a[4]), k(&a[5]));
        for row in 0..grid {
            let (q, b) = (row % l, row / l / heads);
            let len = self.u(lens, b) as usize;
            let base = row * l;
            if q >= len {
                for c in 0..l {
                    self.put(out, base + c, 0.0, kind);
                }
                continue;
            }
            let m = (0..len).map(|c| self.f(s, base + c)).fold(-3.0e38f32, f32::max);
            let sum: f32 = (0..len).map(|c| (self.f(s, base + c) - m).exp()).sum();
            let inv = 1.0 / sum;
            for c in 0..l {
                let v = if c < len { (self.f(s, base + c) - m).exp() * inv } else { 0.0 };
                self.put(out, base + c, v, kind);
            }
        }
    }

    /// The `merge_heads` kernel of `kernels/bert.cu`, thread by thread.
    fn merge_heads(&mut self, _grid: usize, threads: usize, a: &[Arg]) {
        let (ctx, l, h, heads, n, out, kind) = (p(&a[0]), i(&a[1]), i(&a[2]), i(&a[3]), i(&a[4]), p(&a[5]), k(&a[6]));
        let d = h / heads;
        for t in 0..threads.min(n) {
            let (row, col) = (t / h, t % h);
            let (head, c) = (col / d, col % d);
            let (b, ps) = (row / l, row % l);
            let v = self.f(ctx, ((b * heads + head) * l + ps) * d + c);
            self.put(out, t, v, kind);
        }
    }

    /// The `pool` kernel of `kernels/bert.cu`, thread by thread.
    fn pool(&mut self, _grid: usize, threads: usize, a: &[Arg]) {
        let (x, lens, l, h, nb, cls, out) = (p(&a[0]), p(&a[1]), i(&a[2]), i(&a[3]), i(&a[4]), i(&a[5]), p(&a[6]));
        for t in 0..threads.min(nb * h) {
            let (b, c) = (t / h, t % h);
            let base = b * l * h;
            let v = if cls == 1 {
                self.f(x, base + c)
            } else {
                let len = self.u(lens, b) as usize;
                let mut s = 0.0f32;
                for tok in 0..len {
                    s += self.f(x, base + tok * h + c);
                }
                s / len as f32
            };
            self.put(out, t, v, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Model;
    use super::Emu;
    use crate::bert::Front;
    use crate::forward;
    use std::path::Path;

    fn load() -> (Front, forward::Bert) {
        let dir = crate::default_model_dir();
        assert!(dir.join("model.safetensors").is_file(), "model not found at {}: run `bash scripts/install-model.sh` (or set LAM_MODEL)", dir.display());
        let (front, cfg) = Front::load(&dir, Path::new("model.safetensors")).unwrap();
        let bert = forward::load(&dir.join("model.safetensors"), &cfg).unwrap();
        (front, bert)
    }

    fn unit(mut v: Vec<f32>) -> Vec<f32> {
        lam_core::normalize_in_place(&mut v).unwrap();
        v
    }

    /// The CPU encoder's embedding of one sequence (mean or CLS pooling).
    fn cpu(front: &Front, bert: &forward::Bert, ids: &[u32], cls: bool) -> Vec<f32> {
        let hs = bert.forward(ids);
        let d = bert.hidden;
        if cls {
            unit(hs[..d].to_vec())
        } else {
            let mut row = vec![0.0f32; d];
            front.pool(&hs, &mut row).unwrap();
            row
        }
    }

    /// The whole GPU forward pass (every GEMM shape and stride, every kernel
    /// argument, padding and masking over sequences of different lengths) on
    /// the emulated device, against the CPU encoder.
    #[test]
    fn emulated_gpu_forward_matches_the_cpu_encoder() {
        let (front, mut bert) = load();
        // Two layers keep the naive emulator quick; both sides use the same truncated model.
        bert.layers.truncate(2);
        let texts = ["fn main() { println!(\"hello\"); }", "FAILED tests/test_stats.py::test_mean - AssertionError: 2 != 3 in 0.02s", "ok", "  x  "];
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| front.encode_ids(t.as_bytes()).unwrap()).collect();
        let seqs: Vec<&[u32]> = ids.iter().map(|v| v.as_slice()).collect();
        let d = bert.hidden;
        for cls in [false, true] {
            let want: Vec<Vec<f32>> = ids.iter().map(|s| cpu(&front, &bert, s, cls)).collect();
            let kinds: &[(i32, f32)] = if cls { &[(0, 2e-5)] } else { &[(0, 2e-5), (2, 2e-2), (1, 6e-2)] };
            for &(kind, tol) in kinds {
                let mut emu = Emu::default();
                let mut m = Model::upload(&mut emu, &bert, kind).unwrap();
                let got = m.forward(&mut emu, &seqs, cls).unwrap();
                for (i, w) in want.iter().enumerate() {
                    let g = unit(got[i * d..(i + 1) * d].to_vec());
                    let abs = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                    let cos: f32 = g.iter().zip(w).map(|(a, b)| a * b).sum();
                    assert!(abs <= tol, "kind {kind} cls {cls} text {i}: max abs {abs} (cos {cos})");
                }
                if kind == 0 {
                    // Padding must not touch a sequence: alone, its bits are the same.
                    let alone = m.forward(&mut emu, &seqs[2..3], cls).unwrap();
                    assert_eq!(alone, got[2 * d..3 * d].to_vec(), "cls {cls}: the padded batch changed sequence 2");
                    assert!(emu.gemms > 0 && emu.launches > 0);
                }
            }
        }
    }

    #[test]
    fn too_long_a_sequence_is_an_error() {
        let (_front, bert) = load();
        let mut emu = Emu::default();
        let mut m = Model::upload(&mut emu, &bert, 0).unwrap();
        let long = vec![101u32; bert.max_pos + 1];
        assert!(m.forward(&mut emu, &[&long], false).unwrap_err().contains("position table"));
    }
}
