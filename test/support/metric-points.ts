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

const reader = new TestReader();
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));

/** The data points of the library's instrument `name` now. */
export async function metricPoints(name: string): Promise<DataPoint<unknown>[]> {
  const { resourceMetrics }: { resourceMetrics: ResourceMetrics } = await reader.collect();
  const scope = resourceMetrics.scopeMetrics.find((s) => s.scope.name === DB_LOCK_METER_NAME);
  return (scope?.metrics.find((m) => m.descriptor.name === name)?.dataPoints ?? []) as DataPoint<unknown>[];
}
