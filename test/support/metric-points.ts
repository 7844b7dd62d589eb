/**
 * The library's OpenTelemetry instruments, read on demand (collect()) as an exporter would at its
 * next interval, through an in-memory reader registered as the global meter provider when this
 * module is first imported: the library takes its meter from the global provider at init, so a
 * test file imports this before it starts any app.
 */
import { metrics } from '@opentelemetry/api';
import { type DataPoint, MeterProvider, MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { DB_LOCK_METER_NAME } from '../../lib/core/lock-metrics.js';

class TestReader extends MetricReader {
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

function registerReader(): TestReader {
  const fresh = new TestReader();
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [fresh] }));
  return fresh;
}

let reader = registerReader();

/**
 * A new global meter provider with nothing recorded: apps started from now on count into it (the
 * library takes its meter when an app starts), so a file's tests that read totals can run once per
 * contract target. Apps started before keep counting into the old one, which is no longer read.
 */
export function freshMeterProvider(): void {
  metrics.disable();
  reader = registerReader();
}

/** The data points of the library's instrument `name` now. */
export async function metricPoints(name: string): Promise<DataPoint<unknown>[]> {
  const { resourceMetrics }: { resourceMetrics: ResourceMetrics } = await reader.collect();
  const scope = resourceMetrics.scopeMetrics.find((s) => s.scope.name === DB_LOCK_METER_NAME);
  return (scope?.metrics.find((m) => m.descriptor.name === name)?.dataPoints ?? []) as DataPoint<unknown>[];
}
