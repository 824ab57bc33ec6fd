//! Each formula against values computed by hand (numbers written out in full).

use lam_costmodel::classes::{Class3Inputs, Compressor, class1_summarize, class2_prefill_only, class3_lam};
use lam_costmodel::schedule::{snapshot_steady_state, turns_to_capacity};
use lam_costmodel::*;

fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-12), "{a} != {b}");
}

#[test]
fn parameter_counts_match_the_model_cards() {
    for (name, params, kv_b) in [
        ("llama-3.1-8b", 8_030_261_248.0, 131_072.0),
        ("qwen2.5-7b-instruct", 7_615_616_512.0, 57_344.0),
        ("qwen3-8b", 8_190_735_360.0, 147_456.0),
        ("qwen3-32b", 32_762_123_264.0, 262_144.0),
    ] {
        let m = Model::preset(name).unwrap();
        assert_eq!(m.params, params, "{name}");
        assert_eq!(m.weight_bytes(), 2.0 * params, "{name}");
        assert_eq!(m.kv_bytes_per_token(), kv_b, "{name}");
    }
    assert_eq!(Model::preset("qwen3-32b").unwrap().attn_dim(), 8192.0);
}

#[test]
fn decode_step_and_prefill() {
    let s = Serving::new(Deployment::preset("gb10", "llama-3.1-8b").unwrap(), 1.0, Efficiency::MEASURED).unwrap();
    // (M_w + C kv_b) / BW = (16,060,522,496 + 1000 * 131,072) / 237.4e9
    close(s.decode_step_s(1000.0), 0.06820385213142376);
    // 2 P 100 + 2 L d (150^2 - 50^2)
    close(s.prefill_flops(100.0, 50.0), 1_611_295_129_600.0);
    close(s.prefill_s(100.0, 50.0), 1_611_295_129_600.0 / 90.3e12);
    close(s.reprefill_s(100.0), s.prefill_s(100.0, 0.0));
    // Batch 32 divides only the weight term.
    let s32 = Serving::new(s.deployment().clone(), 32.0, Efficiency::MEASURED).unwrap();
    close(s32.decode_step_s(1000.0), (16_060_522_496.0 / 32.0 + 131_072_000.0) / 237.4e9);
}

#[test]
fn phi_and_ceiling() {
    close(amdahl_ceiling(0.5), 2.0);
    close(amdahl_ceiling(0.0), 1.0);
    let dep = Deployment::preset("gb10", "llama-3.1-8b").unwrap();
    let s = Serving::new(dep.clone(), 1.0, Efficiency::MEASURED).unwrap();
    assert_eq!(s.turn(0.0, 637.0, 39.0).phi(), 0.0);
    let t = s.turn(32768.0, 637.0, 39.0);
    // context part: 4 L d C Delta / F + G C kv_b / BW
    let ctx = 4.0 * 32.0 * 4096.0 * 32768.0 * 637.0 / 90.3e12 + 39.0 * 32768.0 * 131_072.0 / 237.4e9;
    let fixed = (2.0 * 8_030_261_248.0 * 637.0 + 2.0 * 32.0 * 4096.0 * 637.0 * 637.0) / 90.3e12 + 39.0 * 16_060_522_496.0 / 237.4e9;
    close(t.context_s(), ctx);
    close(t.total_s(), ctx + fixed);
    close(t.phi(), ctx / (ctx + fixed));
    let rows = phi_table(&dep, Efficiency::MEASURED, 637.0, 39.0, &[1.0, 32.0], &[32768.0]).unwrap();
    assert_eq!(rows.len(), 2);
    close(rows[0].phi, t.phi());
    assert!(rows[1].phi > rows[0].phi, "weights amortise over the batch, KV reads do not");
}

#[test]
fn roofline_batch_bytes_and_times() {
    let r = Roofline::arc(Deployment::preset("h200", "qwen3-8b").unwrap());
    // (141e9 - 16,381,470,720) / (10,000 * 147,456) = 84.51 -> 84
    assert_eq!(r.batch_for(10_000.0), 84.0);
    assert_eq!(r.batch_for(1e9), 1.0, "B is at least 1");
    close(r.bytes_per_token(10_000.0, 84.0), 1_669_577_508.571_428_5);
    let c = r.call(&Call::new(10_000, 100), 84.0);
    close(c.decode_bytes, 166_957_750_857.142_85);
    close(c.decode_s, 0.03478286476190476);
    close(c.prefill_flops, 2.0 * 8_190_735_360.0 * 10_000.0 + 2.0 * 36.0 * 4096.0 * 1e8);
    let mut g = r.clone();
    g.kv_length = KvLength::PromptPlusGenerated;
    close(g.call(&Call::new(10_000, 100), 84.0).decode_bytes, 100.0 * 16_381_470_720.0 / 84.0 + 1_004_950.0 * 147_456.0);
    // A cached prefix is not prefilled again.
    let cached = r.call(&Call { prompt_tokens: 10_000, decoded_tokens: 100, cached_tokens: 9_000 }, 84.0);
    close(cached.prefill_flops, 2.0 * 8_190_735_360.0 * 1_000.0 + 2.0 * 36.0 * 4096.0 * (1e8 - 81e6));
    let t = r.trajectory(&[Call::new(10_000, 100), Call::new(10_000, 100)]).unwrap();
    assert_eq!(t.batch, 84.0);
    close(t.decode_bytes, 2.0 * 166_957_750_857.142_85);
    close(t.total_s, t.decode_s + t.prefill_s);
}

#[test]
fn replay_ratios() {
    let r = Roofline::arc(Deployment::preset("h200", "qwen3-8b").unwrap());
    let window = PolicyCalls { policy: "window".into(), trajectories: vec![vec![Call::new(10_000, 100); 3]] };
    let arc = PolicyCalls { policy: "arc".into(), trajectories: vec![vec![Call::new(2_000, 100); 3]] };
    let rows = replay(&r, &[window, arc], 0).unwrap();
    assert_eq!(rows[0].time_ratio, 1.0);
    assert!(rows[1].decode_bytes < rows[0].decode_bytes);
    close(rows[1].bytes_ratio, rows[1].decode_bytes / rows[0].decode_bytes);
    close(rows[1].savings_pct, 100.0 * (1.0 - rows[1].bytes_ratio));
    close(rows[1].speedup, rows[0].total_s / rows[1].total_s);
    assert!(replay(&r, &[], 0).is_err());
}

#[test]
fn compaction_event_and_classes() {
    let g = CompactionRates::LAM_GB10;
    // 637/71,708 + 3.68*637/38.2e9 + 3.68*637*(1 + 1/5.18)/53.3e9 + 1000/13e6
    close(g.event_s(637.0, 1000.0), 0.008960285644262036);
    let no_codec = CompactionRates { codec_bytes_s: None, ..g };
    close(no_codec.event_s(637.0, 0.0), 637.0 / 71_708.0 + 3.68 * 637.0 / 38.2e9);

    let dep = Deployment::preset("gb10", "llama-3.1-8b").unwrap();
    // (2 * 560e6 * 1e6 + 4 * 24 * 1024 * 1e6 * 512) / (0.7 * 90.3e12)
    close(class2_prefill_only(&Compressor::xlm_roberta_large(), &dep.device, Efficiency::LAM_BASELINE, 1e6), 18.514976237937038);
    let c1 = class1_summarize(&dep, Efficiency::LAM_BASELINE, 1000.0, 10.0, 0.001).unwrap();
    close(c1.prefill_s, (2.0 * 8_030_261_248.0 * 1000.0 + 2.0 * 32.0 * 4096.0 * 1e6) / (0.7 * 90.3e12));
    close(c1.decode_s, (100.0 * 16_060_522_496.0 + 131_072.0 * (100.0 * 1000.0 + 5000.0)) / 237.4e9);
    close(c1.overhead_s, 0.1);
    let x = Class3Inputs { chunks: 1953.0, dim: 768.0, candidate_pairs: 20_000.0, quantize_bytes_s: 65.4e9 };
    let c3 = class3_lam(&g, &x, 1e6).unwrap();
    close(c3.encode_s, 1e6 / 71_708.0);
    close(c3.quantize_s, 6.0 * 1953.0 * 768.0 / 65.4e9);
    close(c3.hash_s, 2.0 * 1953.0 * 768.0 / 38.2e9);
    close(c3.verify_s, 20_000.0 / 13e6);
    close(c3.codec_s, 3.68e6 * (1.0 + 1.0 / 5.18) / 53.3e9);
}

/// A device and model with round numbers: P = 1e9 (2e9 bytes), L = 1, d = 100,
/// kv_b = 2 * 1 * 1 * 100 * 2 = 400 bytes/token; 1e15 FLOP/s, 1e12 B/s.
fn toy() -> Serving {
    let device = Device { name: "toy".into(), memory_bytes: 1e12, bandwidth: 1e12, flops: 1e15, source: "test".into() };
    let model = Model {
        name: "toy".into(),
        layers: 1,
        hidden: 100,
        heads: 1,
        kv_heads: 1,
        head_dim: 100,
        params: 1e9,
        weight_bytes_per_param: 2.0,
        kv_bytes_per_elem: 2.0,
        source: "test".into(),
    };
    Serving::new(Deployment::new(device, model, 0.0).unwrap(), 1.0, Efficiency::MEASURED).unwrap()
}

const TOY_RATES: CompactionRates =
    CompactionRates { encode_tokens_s: 1e4, hash_bytes_s: 1e9, verify_pairs_s: 1e6, codec_bytes_s: None, codec_ratio: 1.0, bytes_per_token: 4.0 };

#[test]
fn schedules_by_hand() {
    let s = toy();
    let a = [Arrival { tokens: 100, removed: 20, decoded: 10, candidate_pairs: 0 }];
    let admit = run_schedule(&s, &TOY_RATES, &a, &ScheduleConfig::new(Schedule::Admit, Limit::Growth)).unwrap();
    // prefill 80 new: (2e9*80 + 200*80^2)/1e15
    close(admit.prefill_s, 1.6000128e-4);
    // 10 * (2e9 + 80*400) / 1e12
    close(admit.decode_s, 0.02000032);
    // 100/1e4 + 4*100/1e9
    close(admit.compaction_s, 0.0100004);
    assert_eq!(admit.reprefill_s, 0.0);
    assert_eq!(admit.final_context, 80.0);
    let del = run_schedule(&s, &TOY_RATES, &a, &ScheduleConfig::new(Schedule::DeleteInPlace, Limit::Growth)).unwrap();
    close(del.prefill_s, 2.00002e-4);
    close(del.reprefill_s, 1.6000128e-4);
    assert_eq!(del.reprefill_events, 1);
    close(del.total_s, del.prefill_s + del.decode_s + del.compaction_s + del.reprefill_s);

    // Defer to a wall of 150: turn 1 C = 100 (20 pending), turn 2 C = 200 > 150
    // -> delete 40, C = 160, re-prefill 160.
    let two = [a[0], a[0]];
    let cfg = ScheduleConfig { wall: Some(150.0), ..ScheduleConfig::new(Schedule::DeferToWall, Limit::Growth) };
    let d = run_schedule(&s, &TOY_RATES, &two, &cfg).unwrap();
    assert_eq!(d.final_context, 160.0);
    assert_eq!(d.reprefill_events, 1);
    close(d.reprefill_s, s.reprefill_s(160.0));

    // Hard budget of 100: second admit arrival gives 160 -> evict 60.
    let hb = Limit::HardBudget { tokens: 100.0, reprefill_on_evict: true };
    let h = run_schedule(&s, &TOY_RATES, &two, &ScheduleConfig::new(Schedule::Admit, hb)).unwrap();
    assert_eq!(h.evicted_tokens, 60.0);
    assert_eq!(h.final_context, 100.0);
    close(h.reprefill_s, s.reprefill_s(100.0));

    // Growth stops at the KV capacity: (1e12 - 2e9) / 400 = 2,495,000,000 tokens.
    assert_eq!(s.deployment().kv_capacity_tokens(), 2_495_000_000.0);
    let big = [Arrival { tokens: 2_000_000_000, removed: 0, decoded: 1, candidate_pairs: 0 }; 3];
    let g = run_schedule(&s, &TOY_RATES, &big, &ScheduleConfig::new(Schedule::Admit, Limit::Growth)).unwrap();
    assert_eq!((g.turns, g.exhausted_at_turn), (1, Some(2)));

    assert_eq!(turns_to_capacity(854_030.0, 0.0, 637.0, 0.0), 1341.0);
    close(snapshot_steady_state(637.0, 0.25), 2548.0);
    let bad = [Arrival { tokens: 1, removed: 2, decoded: 0, candidate_pairs: 0 }];
    assert!(run_schedule(&s, &TOY_RATES, &bad, &ScheduleConfig::new(Schedule::Admit, Limit::Growth)).is_err());
    // Without a wall, defer-to-wall in the growth regime compacts at the KV
    // capacity: 2e9 + 2e9 = 4e9 passes 2.495e9 with 3e9 pending -> 1e9 left.
    let big = [Arrival { tokens: 2_000_000_000, removed: 1_500_000_000, decoded: 0, candidate_pairs: 0 }; 2];
    let d = run_schedule(&s, &TOY_RATES, &big[..1], &ScheduleConfig::new(Schedule::DeferToWall, Limit::Growth)).unwrap();
    assert_eq!((d.final_context, d.reprefill_events), (2e9, 0));
    let d = run_schedule(&s, &TOY_RATES, &big, &ScheduleConfig::new(Schedule::DeferToWall, Limit::Growth)).unwrap();
    assert_eq!((d.final_context, d.reprefill_events, d.exhausted_at_turn), (1e9, 1, None));
}

#[test]
fn bad_presets_are_errors() {
    let mut d = Device::preset("h200").unwrap();
    d.bandwidth = 0.0;
    assert!(matches!(d.validate(), Err(Error::BadPreset { field: "bandwidth", .. })));
    let mut d = Device::preset("gb10").unwrap();
    d.memory_bytes = -1.0;
    assert!(matches!(d.validate(), Err(Error::BadPreset { field: "memory_bytes", .. })));
    let mut d = Device::preset("gb10").unwrap();
    d.flops = f64::NAN;
    assert!(Deployment::new(d, Model::preset("qwen3-8b").unwrap(), 0.0).is_err());
    let mut m = Model::preset("qwen3-8b").unwrap();
    m.params = -8e9;
    assert!(matches!(m.validate(), Err(Error::BadPreset { field: "params", .. })));
    let mut m = Model::preset("qwen3-8b").unwrap();
    m.layers = 0;
    assert!(matches!(m.validate(), Err(Error::BadPreset { field: "layers", .. })));
    // 65.5 GB of bf16 weights on a 40 GiB A100.
    assert!(matches!(Deployment::preset("a100-sxm4-40gb", "qwen3-32b"), Err(Error::DoesNotFit { .. })));
    assert!(Deployment::new(Device::preset("h200").unwrap(), Model::preset("qwen3-8b").unwrap(), 130e9).is_err());
    assert!(Deployment::new(Device::preset("h200").unwrap(), Model::preset("qwen3-8b").unwrap(), -1.0).is_err());
    assert!(matches!(Device::preset("tpu"), Err(Error::UnknownPreset { .. })));
    assert!(matches!(Model::preset("gpt-5"), Err(Error::UnknownPreset { .. })));
    for d in DEVICE_NAMES {
        Device::preset(d).unwrap().validate().unwrap();
    }
    let rates = CompactionRates { verify_pairs_s: 0.0, ..CompactionRates::LAM_GB10 };
    assert!(rates.validate().is_err());
    assert!(Serving::new(Deployment::preset("h200", "qwen3-8b").unwrap(), 0.5, Efficiency::MEASURED).is_err());
}

#[test]
fn profile_round_trip_and_rejects() {
    let p = DeviceProfile {
        format: PROFILE_FORMAT.into(),
        host: "test".into(),
        created_unix: 0,
        threads: 2,
        line_hash_gb_s: 0.7,
        verify_pairs_per_s: 2e7,
        verify_dim: 768,
        encoder_tokens_per_s: 5000.0,
        encoder: "all-MiniLM-L6-v2".into(),
        codec_gb_s: None,
        notes: vec![],
    };
    let dir = std::env::temp_dir().join(format!("lam-costmodel-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("p.json");
    std::fs::write(&f, p.to_json()).unwrap();
    assert_eq!(DeviceProfile::load(&f).unwrap(), p);
    let r = p.rates(3.68);
    assert_eq!((r.hash_bytes_s, r.codec_bytes_s), (0.7e9, None));
    let bad = DeviceProfile { encoder_tokens_per_s: 0.0, ..p.clone() };
    std::fs::write(&f, bad.to_json()).unwrap();
    let e = DeviceProfile::load(&f).unwrap_err().to_string();
    assert!(e.contains("p.json") && e.contains("encode_tokens_s"), "{e}");
    std::fs::write(&f, "{").unwrap();
    assert!(DeviceProfile::load(&f).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
