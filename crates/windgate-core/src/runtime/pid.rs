//! The PID controller of AS_PID (Mencagli et al., *Parallel Continuous Preference Queries over Out-of-Order and
//! Bursty Data Streams*, eq. 3): it moves the split multiplier `alpha` so that the measured utilisation of the
//! pane-level query (PLQ) workers follows a set-point.
//!
//! The error is `setpoint - rho`: an overloaded farm (`rho` above the set-point) gives a negative error, a
//! smaller `alpha`, a smaller split threshold `theta = alpha * theta_b`, and so more pane splitting. Output and
//! integral are clamped (anti-windup) and `alpha` stays inside its bounds, so a saturated farm cannot wind the
//! controller up.

/// Gains, clamps and bounds. The defaults are the authors' code's values (Kp = 1.8, Ki = 0, Kd = 2, output
/// and integral clamped to 0.2 per step, `alpha` at least 0.01) with the paper's set-point 0.9.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PidConfig {
    pub kp: f64,
    pub ki: f64,
    pub kd: f64,
    pub setpoint: f64,
    /// Largest change of `alpha` per step, and largest integral term.
    pub clamp: f64,
    pub alpha_min: f64,
    pub alpha_max: f64,
}

impl Default for PidConfig {
    fn default() -> Self {
        Self {
            kp: 1.8,
            ki: 0.0,
            kd: 2.0,
            setpoint: 0.9,
            clamp: 0.2,
            alpha_min: 0.01,
            alpha_max: 100.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Pid {
    cfg: PidConfig,
    alpha: f64,
    integral: f64,
    last_error: Option<f64>,
}

impl Pid {
    pub fn new(cfg: PidConfig) -> Self {
        Self {
            cfg,
            alpha: 1.0_f64.clamp(cfg.alpha_min, cfg.alpha_max),
            integral: 0.0,
            last_error: None,
        }
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// One control step with the utilisation measured over the last interval; returns the new `alpha`.
    pub fn step(&mut self, rho: f64) -> f64 {
        let c = self.cfg;
        if !rho.is_finite() {
            return self.alpha;
        }
        let e = c.setpoint - rho;
        self.integral = (self.integral + c.ki * e).clamp(-c.clamp, c.clamp);
        let d = self.last_error.map_or(0.0, |prev| e - prev);
        self.last_error = Some(e);
        let delta = (c.kp * e + self.integral + c.kd * d).clamp(-c.clamp, c.clamp);
        self.alpha = (self.alpha + delta).clamp(c.alpha_min, c.alpha_max);
        self.alpha
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_lowers_alpha_and_underload_raises_it() {
        let mut pid = Pid::new(PidConfig::default());
        let a0 = pid.alpha();
        assert!(pid.step(1.5) < a0);
        let mut pid = Pid::new(PidConfig::default());
        assert!(pid.step(0.2) > a0);
    }

    #[test]
    fn saturation_stays_in_bounds_and_recovers_without_windup() {
        let cfg = PidConfig {
            ki: 0.5,
            ..PidConfig::default()
        };
        let mut pid = Pid::new(cfg);
        for _ in 0..1000 {
            pid.step(40.0);
        }
        assert_eq!(pid.alpha(), cfg.alpha_min);
        // With the integral clamped, a few underloaded steps bring alpha back up.
        let mut steps = 0;
        while pid.alpha() < 0.5 && steps < 20 {
            pid.step(0.0);
            steps += 1;
        }
        assert!(steps < 20, "alpha stuck at {}", pid.alpha());
        for _ in 0..1000 {
            pid.step(0.0);
            assert!(pid.alpha() <= cfg.alpha_max);
        }
    }

    #[test]
    fn step_response_settles_at_the_setpoint() {
        // A plant whose utilisation falls as alpha falls (more splitting spreads the load): rho = 0.6 * alpha + 0.3.
        let mut pid = Pid::new(PidConfig::default());
        let mut rho = 1.5;
        for _ in 0..200 {
            let a = pid.step(rho);
            rho = 0.6 * a + 0.3;
        }
        assert!((rho - 0.9).abs() < 0.02, "rho {rho}");
    }

    #[test]
    fn non_finite_measurements_are_ignored() {
        let mut pid = Pid::new(PidConfig::default());
        assert_eq!(pid.step(f64::NAN), 1.0);
    }
}
