/** The benchmark's workflow bundle: the product's workflows plus the bare fan-out they are measured against. */
export * from '../src/workflows/index.js';
export { bareBatch, bareFanOut, noopHold } from './bare-fan-out.js';
