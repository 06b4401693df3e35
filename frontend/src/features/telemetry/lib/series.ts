/** Series names the run agent records (docs/agent-protocol.md). */

const SYSTEM = /^(residual|residual_final|continuity|courant|cpu|memory|execution)\./;

export const isResidual = (name: string) => name.startsWith("residual.");
export const isResource = (name: string) => name === "cpu.percent" || name === "memory.rss";
/** Function-object columns such as forceCoeffs.Cl (not the front/rear split columns). */
export const isFunctionObject = (name: string) => !SYSTEM.test(name);
export const isPrimaryFunctionObject = (name: string) =>
  isFunctionObject(name) && !/\((f|r)\)$/.test(name);

export const fieldOf = (name: string) => name.slice(name.indexOf(".") + 1);
