/**
 * Group commit: writes queued while a flush is running go out together in the next one, so many
 * concurrent requests share one transaction (and one fsync) instead of paying for one each. Every
 * caller still waits until its own row is committed, and sees the failure if its batch fails.
 */
export class BatchWriter<T> {
  private queue: { item: T; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private flushing = false;

  constructor(
    private readonly write: (items: T[]) => Promise<void>,
    private readonly maxBatch = 500,
  ) {}

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          await this.write(batch.map((b) => b.item));
          for (const b of batch) b.resolve();
        } catch (e) {
          for (const b of batch) b.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
