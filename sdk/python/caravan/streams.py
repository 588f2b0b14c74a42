"""Server streams (task logs, the event stream) as closable iterators."""

import grpc

from caravan import errors


class Stream:
    """An iterator over a gateway's server stream that can be closed.

    `open` is called with the number of the attempt and returns
    `(endpoint, call)`; `reopen` decides, from the error and the items already
    yielded, whether a stream that broke with UNAVAILABLE is opened again (on
    the next address). Use it as a context manager or call `close()` to leave
    a stream that does not end by itself (followed logs, events)."""

    def __init__(self, open_call, transform=None, reopen=None, max_reopens=3):
        self._open = open_call
        self._transform = transform or (lambda item: item)
        self._reopen = reopen or (lambda yielded: False)
        self._max_reopens = max_reopens
        self._reopens = 0
        self._yielded = 0
        self._closed = False
        self._endpoint, self._call = open_call()

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            if self._closed:
                raise StopIteration
            try:
                item = next(self._call)
            except StopIteration:
                self._closed = True
                raise
            except grpc.RpcError as err:
                if self._closed:
                    raise StopIteration from None
                if (
                    err.code() == grpc.StatusCode.UNAVAILABLE
                    and self._reopens < self._max_reopens
                    and self._reopen(self._yielded)
                ):
                    self._reopens += 1
                    self._endpoint, self._call = self._open()
                    continue
                self._closed = True
                raise errors.from_rpc_error(err, self._endpoint.address) from None
            value = self._transform(item)
            if value is None:
                continue
            self._yielded += 1
            return value

    def close(self):
        """Ends the stream; iteration stops."""
        self._closed = True
        self._call.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        call = getattr(self, "_call", None)
        if call is not None and not self._closed:
            call.cancel()
