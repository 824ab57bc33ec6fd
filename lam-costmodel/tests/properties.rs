//! Invariants: modeled time never falls as context grows; testing before
//! prefill never costs more than deleting in place for the same deletion set.

use lam_costmodel::*;
use proptest::prelude::*;

fn deployment() -> impl Strategy<Value = Deployment> {
    (0..DEVICE_NAMES.len(), 0..MODEL_NAMES.len()).prop_filter_map("model fits device", |(d, m)| Deployment::preset(DEVICE_NAMES[d], MODEL_NAMES[m]).ok())
}

fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
    prop::collection::vec(
        (1u64..5000, 0.0f64..=1.0, 0u64..400, 0u64..5000).prop_map(|(tokens, r, decoded, candidate_pairs)| Arrival {
            tokens,
            removed: (tokens as f64 * r) as u64,
            decoded,
            candidate_pairs,
        }),
        1..60,
    )
}

fn limit() -> impl Strategy<Value = Limit> {
    prop_oneof![
        Just(Limit::Growth),
        (1000.0f64..200_000.0, any::<bool>()).prop_map(|(tokens, reprefill_on_evict)| Limit::HardBudget { tokens, reprefill_on_evict }),
    ]
}

proptest! {
    #[test]
    fn turn_time_is_monotone_in_context(dep in deployment(), batch in 1.0f64..256.0, delta in 0.0f64..10_000.0,
                                        g in 0.0f64..1000.0, c in 0.0f64..1e6, dc in 0.0f64..1e6) {
        let s = Serving::new(dep, batch, Efficiency::MEASURED).unwrap();
        prop_assert!(s.turn(c, delta, g).total_s() <= s.turn(c + dc, delta, g).total_s());
        prop_assert!(s.decode_step_s(c) <= s.decode_step_s(c + dc));
        prop_assert!(s.prefill_s(delta, c) <= s.prefill_s(delta, c + dc));
    }

    #[test]
    fn roofline_time_is_monotone_in_prompt_length(dep in deployment(), calls in prop::collection::vec((1u64..100_000, 0u64..4096), 1..30),
                                                  which in any::<prop::sample::Index>(), extra in 1u64..100_000) {
        let r = Roofline::arc(dep);
        let calls: Vec<Call> = calls.into_iter().map(|(p, m)| Call::new(p, m)).collect();
        let mut longer = calls.clone();
        let i = which.index(longer.len());
        longer[i].prompt_tokens += extra;
        let (a, b) = (r.trajectory(&calls).unwrap(), r.trajectory(&longer).unwrap());
        prop_assert!(a.total_s <= b.total_s, "{} > {}", a.total_s, b.total_s);
        prop_assert!(a.decode_bytes <= b.decode_bytes);
    }

    #[test]
    fn schedule_time_is_monotone_in_initial_context(dep in deployment(), a in arrivals(), c0 in 0.0f64..50_000.0, dc in 0.0f64..50_000.0,
                                                    schedule in prop::sample::select(vec![Schedule::Admit, Schedule::DeleteInPlace])) {
        // Not defer-to-wall: a larger start reaches the wall sooner and deletes
        // its pending duplicates earlier, which can make later turns cheaper.
        let s = Serving::new(dep, 1.0, Efficiency::MEASURED).unwrap();
        let cfg = |c| ScheduleConfig { initial_context: c, wall: Some(150_000.0), ..ScheduleConfig::new(schedule, Limit::Growth) };
        let x = run_schedule(&s, &CompactionRates::LAM_GB10, &a, &cfg(c0)).unwrap();
        let y = run_schedule(&s, &CompactionRates::LAM_GB10, &a, &cfg(c0 + dc)).unwrap();
        // Only comparable while both runs serve every turn.
        if x.exhausted_at_turn.is_none() && y.exhausted_at_turn.is_none() {
            prop_assert!(x.total_s <= y.total_s * (1.0 + 1e-12), "{} > {}", x.total_s, y.total_s);
        }
    }

    #[test]
    fn admit_never_costs_more_than_delete_in_place(dep in deployment(), batch in 1.0f64..64.0, a in arrivals(), limit in limit(),
                                                   share in 0.0f64..=1.0, c0 in 0.0f64..20_000.0) {
        let s = Serving::new(dep, batch, Efficiency::MEASURED).unwrap();
        let cfg = |schedule| ScheduleConfig { invalidated_share: share, initial_context: c0, ..ScheduleConfig::new(schedule, limit) };
        let admit = run_schedule(&s, &CompactionRates::LAM_GB10, &a, &cfg(Schedule::Admit)).unwrap();
        let del = run_schedule(&s, &CompactionRates::LAM_GB10, &a, &cfg(Schedule::DeleteInPlace)).unwrap();
        prop_assert_eq!(admit.turns, del.turns);
        prop_assert!(admit.total_s <= del.total_s, "{} > {}", admit.total_s, del.total_s);
        prop_assert_eq!(admit.final_context, del.final_context);
    }
}
