import type { ColumnOptions } from 'typeorm';

/**
 * A BIGINT column read back as a JavaScript number. mysql2 and pg return BIGINT as a string (it
 * may exceed 2^53); the sample's cents and fencing tokens stay far below that, so numbers are safe
 * and keep the arithmetic readable.
 */
export function bigintColumn(name: string, options: ColumnOptions = {}): ColumnOptions {
  return {
    ...options,
    name,
    type: 'bigint',
    transformer: { to: (value: number) => value, from: (value: string | null) => (value === null ? null : Number(value)) },
  };
}
