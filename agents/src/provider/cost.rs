//! What a model call cost, from its token counts and the model's prices.

use super::Usage;
use crate::config::CostConfig;

/// The USD cost of `usage` at `price` (USD per million tokens); 0 without prices.
///
/// `usage.output` already includes the reasoning tokens, so reasoning is not priced again;
/// cached input is priced at `cache_read` and cache writes at `cache_write`.
pub fn cost(usage: &Usage, price: Option<&CostConfig>) -> f64 {
    let Some(price) = price else {
        return 0.0;
    };
    let per_million = |tokens: u64, usd: f64| tokens as f64 * usd / 1_000_000.0;
    per_million(usage.input, price.input)
        + per_million(usage.output, price.output)
        + per_million(usage.cache_read, price.cache_read)
        + per_million(usage.cache_write, price.cache_write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_price_costs_nothing() {
        let usage = Usage {
            input: 1_000_000,
            output: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(cost(&usage, None), 0.0);
    }

    #[test]
    fn prices_are_per_million_tokens() {
        let usage = Usage {
            input: 2_000_000,
            output: 500_000,
            reasoning: 100_000,
            cache_read: 1_000_000,
            cache_write: 4_000_000,
        };
        let price = CostConfig {
            input: 0.15,
            output: 0.60,
            cache_read: 0.075,
            cache_write: 0.5,
        };
        let expected = 0.30 + 0.30 + 0.075 + 2.0;
        assert!((cost(&usage, Some(&price)) - expected).abs() < 1e-12);
    }
}
