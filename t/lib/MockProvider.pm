package MockProvider;

# A mock LLM provider for the integration tests: a forking HTTP/1.1 server
# on a loopback port that records every request it receives (method, path,
# headers, body) as one JSON line, and answers according to a behavior.
#
# The behavior of a request is taken from, first match wins:
#   1. the control file (set_behavior), for all requests;
#   2. the credential: text after "~" in the bearer token, x-api-key or
#      api-key value (e.g. key "sk-a1~status=503");
#   3. the path: a "/m/<behavior>/" segment of the request path;
#   4. "ok".
# A behavior is a comma-separated list of:
#   ok                 200 chat.completion JSON naming the mock and model,
#                      with a usage object (usage=P:C:CACHED:REASONING,
#                      default 11:7:3:2; usage=none: without;
#                      shape=anthropic: an Anthropic message whose usage is
#                      input_tokens P, output_tokens C, cache_read K)
#   status=N           JSON error with status N
#   body=TEXT          error body text (with status=N), URI-escaped
#   retry=S            add "Retry-After: S"
#   sse=N              200 text/event-stream with N data events + [DONE]
#   sseerr=TYPE        200 text/event-stream whose first event is an error
#                      of that type (after a ": ping" comment with ping=1;
#                      Anthropic style "event: error" with anthropic=1;
#                      ssedata=TEXT, URI-escaped: that data instead)
#   gap=MS             delay between SSE events (default 200; 10 for a
#                      fixture)
#   delay=MS           wait before answering
#   reset              close the connection with RST, no response
#   hang               read the request and never answer
#   fixture=NAME       200 text/event-stream replaying
#                      t/fixtures/streams/NAME.sse event by event, chunked
#                      (chunked=0: close-delimited); with
#     cut=N            close after N events (chunked: no last chunk)
#     rst=N            reset (RST) after N events
#     stall=N          after N events send nothing more (heartbeats every
#                      beat=MS if given) until the peer closes (30 s max)
#     beats=N          N ": ping" heartbeats (every beat=MS, default 200)
#                      before the events
#     split=1          write each event in two parts, 30 ms apart
#     echo=N           the first event's "response" object echoes N bytes
#                      of instructions first (the Responses API's
#                      response.created does)
#     half=N           after N events, half of the next one, then RST
#   heartbeats         200 text/event-stream of ": ping" heartbeats every
#                      beat=MS (default 200) and nothing else, until the
#                      peer closes (30 s max)
#   sse=N with cut=K / rst=K   end (FIN / RST) after K events, no [DONE]
#   cutbody=N          (a 200 JSON answer) send its Content-Length but only
#                      N bytes of the body, then close (rst=1: reset;
#                      chunked=1: a chunked body without its last chunk)
#   ifmodel=NAME       the rest applies to requests for model NAME only;
#                      others get "ok"

use strict;
use warnings;

use IO::Socket::INET;
use JSON::PP;
use POSIX qw(WNOHANG _exit);
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(sleep time);
use Fcntl qw(:flock);

sub new {
    my ($class, %o) = @_;
    return bless {%o}, $class;
}

sub port { $_[0]{port} }
sub name { $_[0]{name} }

sub start {
    my ($self) = @_;

    my $srv = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => $self->{port},
        Listen => 128, ReuseAddr => 1, Proto => 'tcp')
        or die "mock $self->{name}: listen $self->{port}: $!";

    my $pid = fork;
    die "fork: $!" unless defined $pid;

    if ($pid) {
        close $srv;
        $self->{pid} = $pid;
        return $self;
    }

    $SIG{CHLD} = 'IGNORE';
    $SIG{TERM} = sub { _exit(0) };

    while (1) {
        my $c = $srv->accept or next;
        my $child = fork;
        if (defined $child && $child == 0) {
            close $srv;
            $SIG{TERM} = 'DEFAULT';
            eval { $self->serve($c) };
            _exit(0);
        }
        close $c;
    }
}

sub stop {
    my ($self) = @_;
    return unless $self->{pid};
    kill 'TERM', $self->{pid};
    waitpid($self->{pid}, 0);
    delete $self->{pid};
}

sub DESTROY {
    my ($self) = @_;
    local $?;
    $self->stop if $self->{pid} && $$ != $self->{pid};
}

sub set_behavior {
    my ($self, $b) = @_;
    if (!defined $b) {
        unlink $self->{control};
        return;
    }
    open my $fh, '>', "$self->{control}.tmp" or die $!;
    print $fh $b;
    close $fh;
    rename "$self->{control}.tmp", $self->{control};
}

# all recorded requests, oldest first
sub requests {
    my ($self) = @_;
    open my $fh, '<', $self->{log} or return [];
    my $j = JSON::PP->new->ascii;
    my @r = map { $j->decode($_) } grep { /\S/ } <$fh>;
    return \@r;
}

sub clear {
    my ($self) = @_;
    unlink $self->{log};
}

# the connections the requests since the last clear came from, in order
# ("c1 c2": the bearer tokens sk-c1..., sk-c2...; "?" for another), then
# clear
sub tried {
    my ($self) = @_;
    my @keys;
    for my $req (@{$self->requests}) {
        my ($k) = ($req->{headers}{authorization} // '')
                  =~ /^Bearer sk-([A-Za-z0-9]+)/;
        push @keys, $k // '?';
    }
    $self->clear;
    return join(' ', @keys);
}

sub serve {
    my ($self, $c) = @_;

    # keep-alive: answer requests until the peer closes
    while (1) {
        my $req = read_request($c) or return;
        $self->record($req);

        my $b = $self->behavior($req);
        my $keep = $self->respond($c, $req, $b);
        return unless $keep;
    }
}

sub read_request {
    my ($c) = @_;
    my $buf = '';

    while ($buf !~ /\r\n\r\n/) {
        my $n = sysread($c, $buf, 65536, length $buf);
        return undef unless $n;
    }

    my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
    my @lines = split /\r\n/, $head;
    my ($method, $path) = (shift @lines) =~ /^(\S+) (\S+)/;

    my (%h, @order);
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        push @order, $k;
        $h{lc $k} = exists $h{lc $k} ? "$h{lc $k}, $v" : $v;
    }

    my $len = $h{'content-length'} // 0;
    while (length $rest < $len) {
        my $n = sysread($c, $rest, $len - length $rest, length $rest);
        return undef unless $n;
    }

    return { method => $method, path => $path, headers => \%h,
             header_names => \@order, body => $rest, time => time };
}

sub record {
    my ($self, $req) = @_;
    open my $fh, '>>', $self->{log} or die $!;
    flock($fh, LOCK_EX);
    print $fh JSON::PP->new->canonical->ascii->encode($req), "\n";
    close $fh;
}

sub behavior {
    my ($self, $req) = @_;

    if (open my $fh, '<', $self->{control}) {
        local $/;
        my $b = <$fh>;
        return $b if defined $b && length $b;
    }

    my $h = $req->{headers};
    my $key = $h->{'x-api-key'} // $h->{'api-key'} // '';
    if (!$key && ($h->{authorization} // '') =~ /^Bearer (\S+)/) {
        $key = $1;
    }
    return $1 if $key =~ /~(.+)$/;

    return $1 if $req->{path} =~ m{/m/([^/]+)/};

    return 'ok';
}

sub unescape {
    my ($s) = @_;
    $s =~ s/%([0-9A-Fa-f]{2})/chr(hex $1)/ge;
    return $s;
}

sub respond {
    my ($self, $c, $req, $b) = @_;

    my %o;
    for (split /,/, $b) {
        my ($k, $v) = split /=/, $_, 2;
        $o{$k} = $v // 1;
    }

    # ifmodel=NAME: the behavior is for that model only, others get "ok"
    if (defined $o{ifmodel}) {
        my $want = eval { decode_json($req->{body})->{model} } // '';
        %o = () if $want ne $o{ifmodel};
    }

    sleep($o{delay} / 1000) if $o{delay};

    if ($o{reset}) {
        setsockopt($c, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
        close $c;
        return 0;
    }

    if ($o{hang}) {
        my $x;
        sysread($c, $x, 1);
        return 0;
    }

    my $model = eval { decode_json($req->{body})->{model} } // '';

    if ($o{sseerr}) {
        my $ev = JSON::PP->new->canonical->encode({ error => {
            type => $o{sseerr}, message => "mock $self->{name} $o{sseerr}" } });
        if ($o{anthropic}) {
            $ev = JSON::PP->new->canonical->encode({ type => 'error',
                error => { type => $o{sseerr}, message => 'Overloaded' } });
        }
        $ev = unescape($o{ssedata}) if defined $o{ssedata};
        my $out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            . "Connection: close\r\n\r\n";
        $out .= ": ping\n\n" if $o{ping};
        $out .= "event: error\n" if $o{anthropic};
        $out .= "data: $ev\n\n";
        syswrite($c, $out);
        close $c;
        return 0;
    }

    if ($o{fixture} || $o{heartbeats}) {
        return $self->replay($c, \%o);
    }

    if ($o{sse}) {
        my $gap = ($o{gap} // 200) / 1000;
        syswrite($c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     . "Cache-Control: no-cache\r\nConnection: close\r\n\r\n");
        for my $i (1 .. $o{sse}) {
            if (defined $o{cut} && $i > $o{cut}) {
                close $c;
                return 0;
            }
            if (defined $o{rst} && $i > $o{rst}) {
                rst($c);
                return 0;
            }
            my $ev = JSON::PP->new->canonical->encode({
                id => "chunk-$i", model => $model,
                choices => [{ delta => { content => "part $i " } }] });
            syswrite($c, "data: $ev\n\n") or return 0;
            sleep($gap);
        }
        syswrite($c, "data: [DONE]\n\n");
        close $c;
        return 0;
    }

    my ($status, $body, $ctype) = (200, undef, 'application/json');

    if ($o{status}) {
        $status = $o{status};
        $body = defined $o{body} ? unescape($o{body})
            : encode_json({ error => { message => "mock $self->{name} error $status",
                                       type => 'mock_error', code => "mock_$status" } });
    } elsif (($o{shape} // '') eq 'anthropic') {
        my ($p, $c, $k) = split /:/, ($o{usage} // '11:7:3:2');
        $body = JSON::PP->new->canonical->encode({
            id => 'msg_mock', type => 'message', role => 'assistant',
            model => $model, provider => $self->{name},
            content => [{ type => 'text', text => "hello from $self->{name}" }],
            stop_reason => 'end_turn', stop_sequence => undef,
            usage => { input_tokens => $p + 0, output_tokens => $c + 0,
                       cache_creation_input_tokens => 0,
                       cache_read_input_tokens => $k + 0 } });
    } else {
        my %ok = (
            id => 'chatcmpl-mock', object => 'chat.completion',
            model => $model, provider => $self->{name},
            choices => [{ index => 0, message => { role => 'assistant',
                          content => "hello from $self->{name}" } }]);
        # usage=P:C:CACHED:REASONING (default 11:7:3:2), usage=none: absent
        my $u = $o{usage} // '11:7:3:2';
        if ($u ne 'none') {
            my ($p, $c, $k, $r) = map { $_ + 0 } split /:/, $u;
            $ok{usage} = { prompt_tokens => $p, completion_tokens => $c,
                           total_tokens => $p + $c,
                           prompt_tokens_details => { cached_tokens => $k },
                           completion_tokens_details =>
                               { reasoning_tokens => $r } };
        }
        $body = JSON::PP->new->canonical->encode(\%ok);
    }

    my $resp = "HTTP/1.1 $status Mock\r\nContent-Type: $ctype\r\n"
        . "Content-Length: " . length($body) . "\r\n"
        . "X-Mock-Provider: $self->{name}\r\n";
    $resp .= "Retry-After: $o{retry}\r\n" if $o{retry};
    # hdr=Name:value (URL-escaped): one more response header
    $resp .= unescape($o{hdr}) . "\r\n" if defined $o{hdr};

    if (defined $o{cutbody} && $o{chunked}) {
        # a chunked body without its last chunk
        my $part = substr($body, 0, $o{cutbody});
        syswrite($c, "HTTP/1.1 $status Mock\r\nContent-Type: $ctype\r\n"
                     . "Transfer-Encoding: chunked\r\n\r\n"
                     . sprintf("%x\r\n%s\r\n", length $part, $part));
        sleep(0.1);
        if ($o{rst}) { rst($c) } else { close $c }
        return 0;
    }

    if (defined $o{cutbody}) {
        # the promised length, not the bytes
        syswrite($c, "$resp\r\n" . substr($body, 0, $o{cutbody}));
        sleep(0.1);
        if ($o{rst}) { rst($c) } else { close $c }
        return 0;
    }

    $resp .= "\r\n$body";

    syswrite($c, $resp);
    return 1;
}

sub rst {
    my ($c) = @_;
    setsockopt($c, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
    close $c;
}

# the events of a fixture file (each with its blank line)
sub fixture_events {
    my ($name) = @_;
    my $dir = __FILE__;
    $dir =~ s{/lib/MockProvider\.pm$}{/fixtures/streams};
    open my $fh, '<', "$dir/$name.sse" or die "fixture $name: $!";
    local $/;
    my $text = <$fh>;
    close $fh;
    my @ev = grep { /\S/ } split /(?<=\n\n)/, $text;
    return @ev;
}

# waits until the peer closes (or max seconds), heartbeats every $beat s
sub linger {
    my ($c, $beat, $max, $out) = @_;
    my $end = time + $max;
    my $next = $beat ? time + $beat : $end;
    while (time < $end) {
        my $rin = '';
        vec($rin, fileno($c), 1) = 1;
        my $wait = ($next < $end ? $next : $end) - time;
        $wait = 0 if $wait < 0;
        if (select(my $rout = $rin, undef, undef, $wait)) {
            my $x;
            return unless sysread($c, $x, 1);
        }
        if ($beat && time >= $next) {
            $out->(": ping\n\n") or return;
            $next = time + $beat;
        }
    }
}

sub replay {
    my ($self, $c, $o) = @_;

    my $chunked = $o->{chunked} // 1;
    my $gap = ($o->{gap} // 10) / 1000;
    my $beat = ($o->{beat} // 200) / 1000;

    my $head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        . "Cache-Control: no-cache\r\nX-Mock-Provider: $self->{name}\r\n"
        . ($chunked ? "Transfer-Encoding: chunked\r\n"
                    : "Connection: close\r\n") . "\r\n";
    syswrite($c, $head) or return 0;

    my $out = sub {
        my ($data) = @_;
        return syswrite($c, $chunked
            ? sprintf("%x\r\n%s\r\n", length $data, $data) : $data);
    };

    if ($o->{heartbeats}) {
        linger($c, $beat, 30, $out);
        close $c;
        return 0;
    }

    for (1 .. ($o->{beats} // 0)) {
        $out->(": ping\n\n") or return 0;
        sleep($beat);
    }

    my @ev = fixture_events($o->{fixture});
    my $n = 0;

    if ($o->{echo}) {
        my $text = 'You are a careful coding agent. ' x ($o->{echo} / 32 + 1);
        $text = substr($text, 0, $o->{echo});
        $ev[0] =~ s/"response":\{/"response":{"instructions":"$text",/
            or die "echo: no response object in the first event";
    }

    for my $ev (@ev) {
        if (defined $o->{cut} && $n >= $o->{cut}) {
            close $c;
            return 0;
        }
        if (defined $o->{rst} && $n >= $o->{rst}) {
            rst($c);
            return 0;
        }
        if (defined $o->{half} && $n >= $o->{half}) {
            $out->(substr($ev, 0, int(length($ev) / 2))) or return 0;
            sleep(0.1);
            rst($c);
            return 0;
        }
        if (defined $o->{stall} && $n >= $o->{stall}) {
            linger($c, $o->{beat} ? $beat : 0, 30, $out);
            close $c;
            return 0;
        }
        if ($o->{split} && length $ev > 2) {
            my $half = int(length($ev) / 2);
            $out->(substr($ev, 0, $half)) or return 0;
            sleep(0.03);
            $out->(substr($ev, $half)) or return 0;
        } else {
            $out->($ev) or return 0;
        }
        $n++;
        sleep($gap) if $gap;
    }

    syswrite($c, "0\r\n\r\n") if $chunked;
    close $c;
    return 0;
}

1;
