import { useMutation, useQueryClient } from "@tanstack/react-query";

/** A mutation whose success refetches the list it changed. */
export function useListMutation<V = void, R = unknown>(mutationFn: (v: V) => Promise<R>, list: string, onSuccess?: (r: R) => void) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn,
    onSuccess: (r: R) => {
      void qc.invalidateQueries({ queryKey: [list] });
      onSuccess?.(r);
    },
  });
}
