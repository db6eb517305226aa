//! Fault injection for the emulated device, deterministic from a seed.
//!
//! Fault model: the device can (1) fail whole, after which every command returns Namespace
//! Not Ready; (2) fail one command transiently with Internal Error, either the N-th command
//! after the plan is installed or each command with probability p; (3) delay a command's
//! completion by extra latency, always or with probability p. Zones can also be moved to Read
//! Only or Offline (see `EmuDevice::set_zone_state`). Power loss is modelled separately by the
//! device. No fault corrupts data silently: the layers above are not built to survive that.

use std::time::Duration;

use zns::{NvmeStatus, SimRng};

/// What to inject. The default injects nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    pub seed: u64,
    /// Fail the N-th command (1-based, counted from when the plan is installed) once.
    pub fail_nth: Option<u64>,
    /// Fail each command with this probability.
    pub fail_probability: f64,
    /// Extra completion latency.
    pub extra_latency: Duration,
    /// Probability that a command gets the extra latency (1.0 = every command).
    pub latency_probability: f64,
}

impl FaultPlan {
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [
            ("fail probability", self.fail_probability),
            ("latency probability", self.latency_probability),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} {p} is not within 0..=1"));
            }
        }
        if self.fail_nth == Some(0) {
            return Err("fail_nth counts from 1".into());
        }
        Ok(())
    }

    /// Whether the plan can change any command's fate. A plan that cannot draws nothing
    /// from its seed and never reads its command count, so the device may admit commands
    /// without consulting it (and without its lock).
    pub fn injects(&self) -> bool {
        self.fail_nth.is_some() || self.fail_probability > 0.0 || !self.extra_latency.is_zero()
    }
}

/// The running state of a plan.
#[derive(Clone, Debug)]
pub struct FaultState {
    plan: FaultPlan,
    rng: SimRng,
    commands: u64,
    failed: bool,
}

/// What happens to one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Proceed,
    Delay(Duration),
    Fail(NvmeStatus),
}

impl FaultState {
    pub fn new(plan: FaultPlan) -> FaultState {
        let rng = SimRng::new(plan.seed);
        FaultState {
            plan,
            rng,
            commands: 0,
            failed: false,
        }
    }

    pub fn fail_device(&mut self) {
        self.failed = true;
    }

    pub fn device_failed(&self) -> bool {
        self.failed
    }

    /// Whether `admit` can return anything but `Proceed`.
    pub fn injects(&self) -> bool {
        self.failed || self.plan.injects()
    }

    /// Decides the fate of the next command. Draws from the seed in command order, so a run
    /// with the same commands and seed injects the same faults.
    pub fn admit(&mut self) -> Verdict {
        if self.failed {
            return Verdict::Fail(NvmeStatus::NamespaceNotReady);
        }
        self.commands += 1;
        if self.plan.fail_nth == Some(self.commands) {
            return Verdict::Fail(NvmeStatus::InternalError);
        }
        if self.plan.fail_probability > 0.0 && self.rng.chance(self.plan.fail_probability) {
            return Verdict::Fail(NvmeStatus::InternalError);
        }
        if !self.plan.extra_latency.is_zero() && self.rng.chance(self.plan.latency_probability) {
            return Verdict::Delay(self.plan.extra_latency);
        }
        Verdict::Proceed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_command_fails_once_and_probability_is_seeded() {
        let mut f = FaultState::new(FaultPlan {
            fail_nth: Some(3),
            ..Default::default()
        });
        let v: Vec<_> = (0..5).map(|_| f.admit()).collect();
        assert_eq!(v[2], Verdict::Fail(NvmeStatus::InternalError));
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, x)| i == 2 || *x == Verdict::Proceed));

        let plan = FaultPlan {
            seed: 5,
            fail_probability: 0.3,
            ..Default::default()
        };
        let run = |p: &FaultPlan| {
            let mut f = FaultState::new(p.clone());
            (0..1000).map(|_| f.admit()).collect::<Vec<_>>()
        };
        let a = run(&plan);
        assert_eq!(a, run(&plan));
        let fails = a.iter().filter(|v| matches!(v, Verdict::Fail(_))).count();
        assert!((200..400).contains(&fails), "{fails} failures for p = 0.3");

        f.fail_device();
        assert_eq!(f.admit(), Verdict::Fail(NvmeStatus::NamespaceNotReady));
        assert!(FaultPlan {
            fail_probability: 1.5,
            ..Default::default()
        }
        .validate()
        .is_err());
    }
}
