/** A token bucket: `rate` tokens a second, at most `burst` saved up; it starts full. */
export class TokenBucket {
  private tokens: number;
  private tokensAt: number;
  private readonly rate: number;
  private readonly burst: number;
  private readonly now: () => number;

  /** `now` in milliseconds (tests); default performance.now. */
  constructor(rate: number, burst: number, now: () => number = () => performance.now()) {
    this.rate = rate;
    this.burst = burst;
    this.now = now;
    this.tokens = burst;
    this.tokensAt = now();
  }

  /** Spends a token; false when none is left. */
  take(): boolean {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.tokensAt) / 1000) * this.rate);
    this.tokensAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
